"""Reading lm-eval sample files and pairing arms, on outputs recorded from a real
`lm_eval run --model vllm --log_samples` of the shipped model (tests/fixtures/lm_eval_run)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evals.errors import UserError
from evals.pair.pairing import pair_task
from evals.pair.samples import read_output_dir

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_run"


def copy_fixture(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURE, target)
    return target


def samples_file(root: Path, task: str) -> Path:
    return next(root.rglob(f"samples_{task}_*.jsonl"))


def edit_line(path: Path, index: int, change) -> dict:
    lines = path.read_text().splitlines()
    row = json.loads(lines[index])
    change(row)
    lines[index] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    return row


def test_reads_generate_and_multiple_choice_samples():
    arm = read_output_dir(FIXTURE)
    assert arm.tasks() == ["tiny_reviews_gen", "tiny_reviews_mc"]
    gen = [r for r in arm.records if r.task == "tiny_reviews_gen"]
    mc = [r for r in arm.records if r.task == "tiny_reviews_mc"]
    assert len(gen) == len(mc) == 30
    assert all(r.prompt.startswith("Review: ") and r.prompt.endswith("Sentiment:") for r in gen)
    assert {r.target for r in gen} <= {"positive", "negative", "neutral"}
    assert all(r.metrics["exact_match"] == float(r.prediction == r.target) for r in gen)
    assert all(r.choices == ("positive", "negative", "neutral") for r in mc)
    assert all(r.metrics["acc"] == float(r.prediction == r.target) for r in mc)
    assert {"tiny_reviews_gen", "tiny_reviews_mc"} <= set(arm.task_hashes)


def test_pairing_an_arm_with_itself_is_aligned():
    arm = read_output_dir(FIXTURE)
    paired = pair_task(arm, arm, "tiny_reviews_gen", "exact_match")
    assert paired.n == 30 and paired.filter == "strip"
    assert list(paired.doc_ids) == sorted(paired.doc_ids)
    assert (paired.baseline == paired.candidate).all() and paired.is_binary


def test_changed_prompt_is_named(tmp_path):
    b = copy_fixture(tmp_path, "b")
    row = edit_line(samples_file(b, "tiny_reviews_gen"), 4,
                    lambda r: r.update(prompt_hash="0" * 64))
    with pytest.raises(UserError, match=f"doc_id {row['doc_id']}: the arms saw different prompts"):
        pair_task(read_output_dir(FIXTURE), read_output_dir(b), "tiny_reviews_gen", "exact_match")


def test_changed_target_is_named(tmp_path):
    """A task edit that changes only the targets (doc_to_target) keeps documents and
    prompts: the target hash catches it, at the first such item."""
    b = copy_fixture(tmp_path, "b")
    path = samples_file(b, "tiny_reviews_gen")
    edit_line(path, 9, lambda r: r.update(target="neutral", target_hash="2" * 64))
    row = edit_line(path, 2, lambda r: r.update(target="neutral", target_hash="1" * 64))
    with pytest.raises(UserError, match=f"doc_id {row['doc_id']}: the arms scored against "
                                        "different targets .*'positive' vs 'neutral'"):
        pair_task(read_output_dir(FIXTURE), read_output_dir(b), "tiny_reviews_gen", "exact_match")


def test_changed_document_is_named(tmp_path):
    b = copy_fixture(tmp_path, "b")
    row = edit_line(samples_file(b, "tiny_reviews_mc"), 0, lambda r: r.update(doc_hash="1" * 64))
    with pytest.raises(UserError, match=f"doc_id {row['doc_id']}: the arms saw different documents"):
        pair_task(read_output_dir(FIXTURE), read_output_dir(b), "tiny_reviews_mc", "acc")


def test_missing_item_is_never_dropped_silently(tmp_path):
    b = copy_fixture(tmp_path, "b")
    path = samples_file(b, "tiny_reviews_gen")
    lines = path.read_text().splitlines()
    dropped = json.loads(lines.pop(7))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=f"doc_id {dropped['doc_id']} .* only in the baseline arm"):
        pair_task(read_output_dir(FIXTURE), read_output_dir(b), "tiny_reviews_gen", "exact_match")


def test_unknown_metric_and_filter_are_named():
    arm = read_output_dir(FIXTURE)
    with pytest.raises(UserError, match="no metric `f1`.*available: exact_match"):
        pair_task(arm, arm, "tiny_reviews_gen", "f1")
    with pytest.raises(UserError, match="no filter `flexible`"):
        pair_task(arm, arm, "tiny_reviews_gen", "exact_match", "flexible")


def test_truncated_file_names_file_and_line(tmp_path):
    b = copy_fixture(tmp_path, "b")
    path = samples_file(b, "tiny_reviews_mc")
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(UserError, match=r"line \d+: not valid JSON"):
        read_output_dir(b)


def test_directory_without_samples(tmp_path):
    with pytest.raises(UserError, match="no samples_"):
        read_output_dir(tmp_path)


def test_compare_cli_rejects_mismatched_items_with_exit_2(tmp_path):
    b = copy_fixture(tmp_path, "b")
    row = edit_line(samples_file(b, "tiny_reviews_gen"), 3,
                    lambda r: r.update(prompt_hash="0" * 64))
    result = subprocess.run([sys.executable, "-m", "evals", "compare", str(FIXTURE), str(b),
                             "--reports", str(tmp_path / "r")], capture_output=True, text=True,
                            cwd=FIXTURE.parents[2], timeout=120)
    assert result.returncode == 2
    assert f"doc_id {row['doc_id']}" in result.stderr and "prompts" in result.stderr
    assert "Traceback" not in result.stderr


def test_compare_cli_on_identical_directories_finds_no_flips(tmp_path):
    result = subprocess.run([sys.executable, "-m", "evals", "compare", str(FIXTURE), str(FIXTURE),
                             "--reports", str(tmp_path / "r")], capture_output=True, text=True,
                            cwd=FIXTURE.parents[2], timeout=120)
    assert result.returncode == 3, result.stdout + result.stderr  # 30 items cannot decide
    summary = json.loads(next((tmp_path / "r").glob("*/summary.json")).read_text())
    assert [t["task"] for t in summary["tasks"]] == ["tiny_reviews_gen", "tiny_reviews_mc"]
    assert all(t["correct_to_wrong"] == t["wrong_to_correct"] == 0 for t in summary["tasks"])
    assert (tmp_path / "r" / summary["run_id"] / "report.html").exists()
    # options left out take the defaults a config file gets (one definition of each)
    from evals.plan.config import DEFAULT_SEED, GateConfig
    defaults = GateConfig()
    assert summary["gate"] == {"alpha": defaults.alpha, "margin": defaults.margin,
                               "correction": defaults.correction}
    assert summary["config"]["seed"] == DEFAULT_SEED


def test_compare_and_plan_options_override_the_defaults(tmp_path, capsys):
    from evals.cli import main

    code = main(["compare", str(FIXTURE), str(FIXTURE), "--reports", str(tmp_path / "r"),
                 "--alpha", "0.1", "--margin", "0.04", "--seed", "7"])
    assert code == 3
    summary = json.loads(next((tmp_path / "r").glob("*/summary.json")).read_text())
    assert (summary["gate"]["alpha"], summary["gate"]["margin"]) == (0.1, 0.04)
    assert summary["config"]["seed"] == 7
    capsys.readouterr()
    assert main(["plan", "--discordance", "0.05", "--drop", "0.02"]) == 0
    default_alpha = capsys.readouterr().out
    assert main(["plan", "--discordance", "0.05", "--drop", "0.02", "--alpha", "0.01"]) == 0
    assert capsys.readouterr().out != default_alpha  # a stricter level needs more items


def _set_metric(root: Path, task: str, metric: str, value: float) -> None:
    path = samples_file(root, task)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row[metric] = value
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_compare_cli_on_a_total_regression_exits_1(tmp_path):
    """Every item flips correct -> wrong (a broken-MTP "95% -> 0%"): REGRESSION, exit 1."""
    a, b = copy_fixture(tmp_path, "a"), copy_fixture(tmp_path, "b")
    for root, value in ((a, 1.0), (b, 0.0)):
        _set_metric(root, "tiny_reviews_gen", "exact_match", value)
        _set_metric(root, "tiny_reviews_mc", "acc", value)
    result = subprocess.run([sys.executable, "-m", "evals", "compare", str(a), str(b),
                             "--reports", str(tmp_path / "r")], capture_output=True, text=True,
                            cwd=FIXTURE.parents[2], timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "VERDICT: REGRESSION" in result.stdout
    summary = json.loads(next((tmp_path / "r").glob("*/summary.json")).read_text())
    assert all(t["wrong_to_correct"] == 0 and t["correct_to_wrong"] == t["n"]
               for t in summary["tasks"])


def _compare(tmp_path: Path, a: Path, b: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evals", "compare", str(a), str(b), "--reports",
                           str(tmp_path / "r"), *extra], capture_output=True, text=True,
                          cwd=FIXTURE.parents[2], timeout=120)


def test_compare_with_clusters_uses_cluster_robust_tests(tmp_path):
    result = _compare(tmp_path, FIXTURE, FIXTURE, "--cluster", "tiny_reviews_gen=domain")
    assert result.returncode in (0, 3), result.stderr
    summary = json.loads(next((tmp_path / "r").glob("*/summary.json")).read_text())
    gen = next(t for t in summary["tasks"] if t["task"] == "tiny_reviews_gen")
    assert gen["regression_test"].startswith("cluster-robust t-test") and gen["clusters"] > 1
    other = next(t for t in summary["tasks"] if t["task"] == "tiny_reviews_mc")
    assert other["regression_test"] == "exact McNemar, one-sided" and other["clusters"] is None


@pytest.mark.parametrize("flag, message", [
    ("tiny_reviews_gen=no_such_field", "doc_id 0 has no field `no_such_field`"),
    ("tiny_reviews_gen=id", "cluster of its own"),
    ("unknown_task=domain", "--cluster names task(s) unknown_task"),
    ("tiny_reviews_gen", "--cluster takes TASK=FIELD"),
])
def test_bad_cluster_field_is_one_line_exit_2(tmp_path, flag, message):
    result = _compare(tmp_path, FIXTURE, FIXTURE, "--cluster", flag)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_rerun_of_compare_on_changed_content_keeps_both_runs(tmp_path):
    """The run id covers the outputs' content: the same paths with new content are a new
    run, recorded beside the old one (which keeps its meaning), in one deployment per pair
    of paths, in the --store given."""
    b = copy_fixture(tmp_path, "b")
    store = tmp_path / "store"
    first = _compare(tmp_path, FIXTURE, b, "--store", str(store))
    again = _compare(tmp_path, FIXTURE, b, "--store", str(store))
    assert first.returncode == again.returncode
    _set_metric(b, "tiny_reviews_gen", "exact_match", 0.0)
    changed = _compare(tmp_path, FIXTURE, b, "--store", str(store))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    run_dirs = sorted(p.name for p in (tmp_path / "r").iterdir() if p.name.startswith("compare-"))
    assert len(run_dirs) == 2  # same content, same id; new content, a new id
    listed = subprocess.run([sys.executable, "-m", "evals", "runs", "--store", str(store)],
                            capture_output=True, text=True, cwd=FIXTURE.parents[2], timeout=120)
    assert all(run_id in listed.stdout for run_id in run_dirs), listed.stdout
    deployments = {line.split()[5] for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert len(deployments) == 1 and next(iter(deployments)).startswith("compare-")
    other = _compare(tmp_path, FIXTURE, FIXTURE, "--store", str(store), "--name", "aa",
                     "--deployment", "nightly-aa")
    assert other.returncode == 3
    listed = subprocess.run([sys.executable, "-m", "evals", "runs", "--store", str(store),
                             "--deployment", "nightly-aa"], capture_output=True, text=True,
                            cwd=FIXTURE.parents[2], timeout=120)
    assert listed.stdout.count("aa-") == 1


def test_compare_and_report_need_neither_vllm_nor_lm_eval(tmp_path):
    """What the light nox sessions (no engine stack) rely on: compare and report run with
    vllm and lm_eval made unimportable."""
    code = ("import sys; sys.modules.update(vllm=None, lm_eval=None); "
            "from evals.cli import main; sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "compare", str(FIXTURE), str(FIXTURE),
                             "--reports", str(tmp_path / "r")], capture_output=True, text=True,
                            cwd=FIXTURE.parents[2], timeout=120)
    assert result.returncode == 3, result.stdout + result.stderr
    run_dir = next((tmp_path / "r").glob("compare-*"))
    rendered = subprocess.run([sys.executable, "-c", code, "report", str(run_dir)],
                              capture_output=True, text=True, cwd=FIXTURE.parents[2], timeout=120)
    assert rendered.returncode == 0, rendered.stderr


def test_compare_and_report_are_light_nox_sessions():
    """noxfile.py (read as source: nox is not installed in the test environment) installs
    the engine stack only for ENGINE_COMMANDS."""
    import ast

    tree = ast.parse((FIXTURE.parents[2] / "noxfile.py").read_text(encoding="utf-8"))
    sessions = {node.targets[0].id: {k.value for k in node.value.keys}
                for node in tree.body if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Dict) and isinstance(node.targets[0], ast.Name)}
    assert {"compare", "report"} <= sessions["LIGHT_COMMANDS"]
    assert not {"compare", "report"} & sessions["ENGINE_COMMANDS"]


def test_a_duplicated_doc_id_is_refused_with_both_lines(tmp_path):
    b = copy_fixture(tmp_path, "b")
    path = samples_file(b, "tiny_reviews_gen")
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[4]]) + "\n")
    with pytest.raises(UserError, match=rf"line {len(lines) + 1}: doc_id 4 .*appears again "
                                        r"\(first on line 5\)"):
        read_output_dir(b)


@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(doc_id="x7"), "doc_id 'x7' is not a whole number"),
    (lambda r: r.update(exact_match=float("inf")), "not a finite number"),
    (lambda r: r.update(metrics="exact_match"), "`metrics` must be a list"),
])
def test_malformed_fields_are_named(tmp_path, change, message):
    b = copy_fixture(tmp_path, "b")
    edit_line(samples_file(b, "tiny_reviews_gen"), 2, change)
    with pytest.raises(UserError, match=message):
        read_output_dir(b)


def test_invalid_utf8_and_non_object_lines_are_named(tmp_path):
    b = copy_fixture(tmp_path, "b")
    path = samples_file(b, "tiny_reviews_gen")
    path.write_bytes(path.read_bytes() + b'{"doc_id": "\xff"}\n')
    with pytest.raises(UserError, match="line 31: not valid UTF-8"):
        read_output_dir(b)
    c = copy_fixture(tmp_path, "c")
    path = samples_file(c, "tiny_reviews_gen")
    path.write_text(path.read_text() + "[1, 2]\n")
    with pytest.raises(UserError, match="must be a JSON object, got list"):
        read_output_dir(c)


def test_a_candidate_nested_in_the_baseline_is_ambiguous_not_a_false_pass(tmp_path):
    """Finding: with the candidate's directory inside the baseline's, the baseline read the
    candidate's samples (newest file per task) and a real drop became PASS."""
    base = copy_fixture(tmp_path, "base")
    nested = base / "candidate"
    shutil.copytree(FIXTURE, nested)
    _set_metric(nested, "tiny_reviews_gen", "exact_match", 0.0)
    result = _compare(tmp_path, base, nested)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "task `tiny_reviews_gen` has 2 samples files" in result.stderr
    assert "candidate/" in result.stderr and result.stderr.count("\n") == 1


def test_two_runs_in_one_directory_are_named(tmp_path):
    both = copy_fixture(tmp_path, "both")
    (model_dir,) = [p for p in both.iterdir() if p.is_dir()]
    shutil.copytree(model_dir, both / "another-model")
    with pytest.raises(UserError, match="has 2 samples files .*exactly one lm-eval run"):
        read_output_dir(both)


def test_lone_surrogates_in_a_response_reach_the_report_replaced(tmp_path):
    b = copy_fixture(tmp_path, "b")
    edit_line(samples_file(b, "tiny_reviews_gen"), 1,
              lambda r: r.update(resps=[["\ud800 broken"]], filtered_resps=["\ud800 broken"]))
    result = _compare(tmp_path, FIXTURE, b)
    assert result.returncode in (0, 1, 3), result.stderr
    run_dir = next((tmp_path / "r").glob("compare-*"))
    items = (run_dir / "paired_items.jsonl").read_text(encoding="utf-8")
    assert '"\ufffd broken"' in items
    assert (run_dir / "report.html").read_text(encoding="utf-8")


def test_a_non_numeric_log_likelihood_is_named(tmp_path):
    b = copy_fixture(tmp_path, "b")
    edit_line(samples_file(b, "tiny_reviews_mc"), 3,
              lambda r: r.update(filtered_resps=[["x", False]] * len(r["filtered_resps"])))
    with pytest.raises(UserError, match="log-likelihood in `filtered_resps` is not a number"):
        read_output_dir(b)


def test_a_results_file_that_is_not_an_object_is_named(tmp_path):
    b = copy_fixture(tmp_path, "b")
    results = next(b.rglob("results_*.json"))
    results.write_text("[1, 2, 3]")
    with pytest.raises(UserError, match="a results file must be a JSON object"):
        read_output_dir(b)


@pytest.mark.parametrize("content, message", [
    ("[]", "a summary must be a JSON object"),
    ('{"schema_version": 1}', "`kind` is missing"),
])
def test_report_on_a_damaged_summary_exits_2(tmp_path, content, message):
    result = _compare(tmp_path, FIXTURE, FIXTURE)
    run_dir = next((tmp_path / "r").glob("compare-*"))
    (run_dir / "summary.json").write_text(content)
    rendered = subprocess.run([sys.executable, "-m", "evals", "report", str(run_dir)],
                              capture_output=True, text=True, cwd=FIXTURE.parents[2],
                              timeout=120)
    assert result.returncode == 3
    assert rendered.returncode == 2 and message in rendered.stderr, rendered.stderr
    assert "Traceback" not in rendered.stderr
