"""Property-based fuzzing of the readers and the CLI with malformed lm-eval outputs.

Each case rewrites a real lm-eval output directory (tests/fixtures/lm_eval_run) in one
way - a field set to any JSON value (control characters, lone surrogates, infinities
and NaN included), a field deleted, a line replaced, invalid UTF-8 inserted, the file
truncated, a line duplicated, the results file replaced - and checks that the readers
either read it or raise one UserError (exit 2), never anything else; the CLI cases check
"exit 0-3 with a verdict, or exit 2 with a one-line message; never a traceback, never
exit 4". The counts are in docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evals.analyse.task_analysis import analyse_task
from evals.cli import main
from evals.errors import UserError
from evals.pair.metric_scale import normalise_metric
from evals.pair.pairing import pair_task
from evals.pair.samples import read_output_dir

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_run"
MODEL_DIR = next(FIXTURE.iterdir()).name
FILES = sorted(p.name for p in (FIXTURE / MODEL_DIR).iterdir())
ORIGINAL = {name: (FIXTURE / MODEL_DIR / name).read_bytes() for name in FILES}
SAMPLE_KEYS = ("doc_id", "metrics", "exact_match", "acc", "doc_hash", "prompt_hash",
               "filtered_resps", "resps", "arguments", "target", "filter", "doc")
RESULT_KEYS = ("task_hashes", "versions", "configs", "config", "results")
TASKS = {"tiny_reviews_gen": "exact_match", "tiny_reviews_mc": "acc"}
READER_CASES = 10_000
CLI_CASES = 300

_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(allow_nan=True, allow_infinity=True) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6)

MUTATION = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(SAMPLE_KEYS + RESULT_KEYS), JSON),
    st.tuples(st.just("delete"), st.sampled_from(SAMPLE_KEYS + RESULT_KEYS), st.none()),
    st.tuples(st.just("line"), st.none(), JSON | _text),
    st.tuples(st.just("bytes"), st.none(), st.binary(min_size=1, max_size=4)),
    st.tuples(st.just("truncate"), st.none(), st.floats(0, 1)),
    st.tuples(st.just("duplicate"), st.none(), st.none()),
)


def _mutate(root: Path, file_name: str, line: int, mutation) -> None:
    path = root / MODEL_DIR / file_name
    kind, key, value = mutation
    data = ORIGINAL[file_name]
    if kind == "bytes":
        at = (line * 7919) % (len(data) + 1)
        path.write_bytes(data[:at] + value + data[at:])
        return
    if kind == "truncate":
        path.write_bytes(data[:int(len(data) * value)])
        return
    text = data.decode("utf-8")
    if file_name.startswith("results_"):
        obj = json.loads(text)
        if kind == "set":
            obj[key] = value
        elif kind == "delete":
            obj.pop(key, None)
        elif kind == "line":
            obj = value
        path.write_text(json.dumps(obj), encoding="utf-8", errors="surrogatepass")
        return
    lines = text.splitlines()
    index = line % len(lines)
    if kind == "duplicate":
        lines.insert(index, lines[index])
    elif kind == "line":
        lines[index] = value if isinstance(value, str) else json.dumps(value)
    else:
        row = json.loads(lines[index])
        if kind == "set":
            row[key] = value
        else:
            row.pop(key, None)
        lines[index] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")


def _copy(tmp: Path) -> Path:
    target = tmp / "b"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(FIXTURE, target)
    return target


@pytest.fixture(scope="module")
def candidate(tmp_path_factory) -> Path:
    """One copy of the fixture for all the reader cases; `_restore` undoes each case's
    mutation (a folder copied and deleted per case cost 14 of the file's 90 CPU-seconds)."""
    return _copy(tmp_path_factory.mktemp("fuzz-readers"))


def _restore(candidate: Path) -> None:
    """The candidate's files as in the fixture again, and nothing else beside them."""
    folder = candidate / MODEL_DIR
    assert sorted(p.name for p in folder.iterdir()) == FILES
    for name in FILES:
        (folder / name).write_bytes(ORIGINAL[name])


@functools.cache
def _read_unchanged(baseline: Path):
    """The untouched fixture, read once: every case mutates only the candidate's copy."""
    return read_output_dir(baseline)


def _read_and_analyse(baseline: Path, candidate: Path) -> None:
    a, b = _read_unchanged(baseline), read_output_dir(candidate)
    for task, metric in TASKS.items():
        if task not in a.tasks() or task not in b.tasks():
            continue
        paired = normalise_metric(pair_task(a, b, task, metric), where="fuzz")
        analyse_task(paired, gated=True, alpha=0.05, margin=0.02, seed=1, n_resamples=100)


@settings(max_examples=READER_CASES, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(file_name=st.sampled_from(FILES), line=st.integers(0, 10**6), mutation=MUTATION)
def test_readers_read_or_refuse_with_one_user_error(candidate, file_name, line, mutation):
    _restore(candidate)
    _mutate(candidate, file_name, line, mutation)
    try:
        _read_and_analyse(FIXTURE, candidate)
    except UserError as exc:
        message = str(exc)
        assert message and "Traceback" not in message


@settings(max_examples=CLI_CASES, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(file_name=st.sampled_from(FILES), line=st.integers(0, 10**6), mutation=MUTATION,
       flags=st.lists(st.sampled_from([("--alpha", "0"), ("--alpha", "0.7"),
                                        ("--margin", "-1"), ("--seed", "-3"),
                                        ("--metric", "tiny_reviews_gen=acc"),
                                        ("--cluster", "tiny_reviews_gen=domain"),
                                        ("--name", "a b")]), max_size=2))
def test_cli_exits_0_to_3_or_2_with_one_line(file_name, line, mutation, flags):
    with tempfile.TemporaryDirectory() as tmp:
        candidate = _copy(Path(tmp))
        _mutate(candidate, file_name, line, mutation)
        out, err = io.StringIO(), io.StringIO()
        args = ["compare", str(FIXTURE), str(candidate), "--reports", str(Path(tmp) / "r"),
                *[part for flag in flags for part in flag]]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:  # argparse's usage errors exit 2 from parse_args
                code = exc.code
        message = err.getvalue()
        assert code in (0, 1, 2, 3), message
        assert "Traceback" not in message
        if code == 2:
            assert message.startswith("error: ") and message.count("\n") == 1, message


SUMMARY_CASES = 200
SUMMARY_KEYS = ("schema_version", "kind", "run_id", "verdict", "exit_code", "reason", "gate",
                "tasks", "arms", "speed", "exercise", "faults", "pooled", "warnings", "config")
TASK_KEYS = ("task", "verdict", "n", "delta", "ci_low", "ci_high", "reason", "gated",
             "correct_to_wrong", "labels", "lengths", "sequential", "metric")


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A real run directory written by `compare` on the fixture."""
    reports = tmp_path_factory.mktemp("summary-fuzz")
    with contextlib.redirect_stdout(io.StringIO()):
        main(["compare", str(FIXTURE), str(FIXTURE), "--reports", str(reports)])
    return next(reports.glob("compare-*"))


@settings(max_examples=SUMMARY_CASES, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(where=st.sampled_from(["top", "task"]), key=st.sampled_from(SUMMARY_KEYS + TASK_KEYS),
       value=JSON, delete=st.booleans())
def test_report_of_a_damaged_summary_renders_or_exits_2(recorded_run, where, key, value,
                                                        delete):
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(recorded_run, run)
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
        target = summary if where == "top" or not summary["tasks"] else summary["tasks"][0]
        if delete:
            target.pop(key, None)
        else:
            target[key] = value
        (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8",
                                          errors="surrogatepass")
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(["report", str(run)])
        assert code in (0, 2), err.getvalue()
        assert "Traceback" not in err.getvalue()
