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
from evals.pairing import pair_task
from evals.samples import read_output_dir

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
