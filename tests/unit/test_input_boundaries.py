"""Bad input at the boundaries: one clear line, exit 2, before anything expensive starts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from evals.plan.config import load_config
from evals.errors import UserError

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "lm_eval_run"
CONFIG = """name: t
model: {model}
tasks: [{task}]
arms:
  baseline: {{engine: {{dtype: bfloat16}}}}
  candidate: {{engine: {{dtype: bfloat16, enable_prefix_caching: true}}}}
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evals", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)


def test_unknown_task_stops_ab_before_any_subprocess(tmp_path):
    """Task names are resolved in the parent (bundled tasks, then lm-eval's index) before
    any worker or audit process starts."""
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(model=REPO / "models" / "tiny-reviews",
                                  task="tiny_reviews_gne"), encoding="utf-8")
    started = time.time()
    result = _cli("ab", str(path), "--reports", str(tmp_path / "r"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "no task named 'tiny_reviews_gne'" in result.stderr and str(path) in result.stderr
    assert "did you mean 'tiny_reviews_gen'" in result.stderr
    assert not list((tmp_path / "r").rglob("worker.log"))  # no worker, no audit ran
    assert "config audit" not in result.stdout
    assert time.time() - started < 120


def test_known_bundled_task_needs_no_lm_eval_index():
    from evals.runner.task_index import unknown_tasks

    assert unknown_tasks(["tiny_reviews_gen", "embedded_tiny"], [str(REPO / "tasks")]) == []


@pytest.mark.parametrize("text, message", [
    ("name: t\nname: u\nmodel: m\n", "the key `name` is given twice"),
    ("arms:\n  baseline: {engine: {dtype: a, dtype: b}}\n", "the key `dtype` is given twice"),
])
def test_duplicated_yaml_keys_are_refused(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        load_config(path)


def test_binary_config_file_is_bad_input(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    result = _cli("ab", str(path))
    assert result.returncode == 2 and "not a text file" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("command", ["ab", "canary", "drift"])
def test_a_bad_config_stops_before_the_pipeline_is_imported(tmp_path, command):
    """The config is read before the pipeline's imports (the analysis' scipy, about a
    second): with scipy unimportable, a bad config still gets its one line and exit 2."""
    path = tmp_path / "c.yaml"
    path.write_text("name: t\nmodel: m\ntasks: 3\n", encoding="utf-8")
    code = ("import sys; sys.modules.update(scipy=None); "
            "from evals.cli import main; sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, command, str(path)],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "c.yaml" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_given_as_an_output_directory_is_named(tmp_path):
    samples = next(FIXTURE.rglob("samples_*.jsonl"))
    result = _cli("compare", str(samples), str(FIXTURE), "--reports", str(tmp_path / "r"))
    assert result.returncode == 2 and "is a file; name the lm-eval output directory" in \
        result.stderr


@pytest.mark.parametrize("flags, message", [
    (["--alpha", "0.9"], "--alpha 0.9"),
    (["--margin", "-1"], "--margin -1.0"),
    (["--seed", "-3"], "--seed: must be 0 or more"),
])
def test_flag_errors_name_the_flag(tmp_path, flags, message):
    result = _cli("compare", str(FIXTURE), str(FIXTURE), "--reports", str(tmp_path / "r"), *flags)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1


def test_reports_naming_a_file_is_bad_input(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    result = _cli("compare", str(FIXTURE), str(FIXTURE), "--reports", str(target))
    assert result.returncode == 2 and "--reports" in result.stderr and "is a file" in \
        result.stderr


def test_comparing_a_directory_with_itself_says_so(tmp_path):
    result = _cli("compare", str(FIXTURE), str(FIXTURE), "--reports", str(tmp_path / "r"))
    assert result.returncode == 3
    assert "baseline and candidate are the same directory" in result.stdout


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path):
    from evals.atomic_files import write_text_atomic

    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(tmp_path / "x.txt", "a lone surrogate \ud800 cannot be UTF-8")
    assert list(tmp_path.iterdir()) == []
