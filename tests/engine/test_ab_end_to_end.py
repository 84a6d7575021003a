"""`python -m evals ab` and `compare` end to end on real engines: A/A, MTP + prefix caching,
a real regression, a crashed arm resumed, and `compare` on the regression run's two lm-eval
`--log_samples` directories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import (ENGINE, LIMIT, REPO, read_summary, run_cli, save_artifact,
                            write_config)

from evals.runner.asks import ASK_PREFIX
from evals.runner.fork_server import FORK_SERVER_ENV

REVIEWS_AND_ADDITION = [{"name": "tiny_reviews_gen", "metric": "exact_match"},
                        {"name": "tiny_addition", "metric": "exact_match"}]
PLAIN = {"engine": {**ENGINE, "enable_prefix_caching": False}}  # the shared baseline


def _worker_pids(arm_dir: Path) -> list[int]:
    """The worker's pid, from its questions in its log (`{"id": "PID-N", ...}`)."""
    log = arm_dir / "worker.log"
    asks = [line for line in log.read_text(encoding="utf-8").splitlines()
            if line.startswith(ASK_PREFIX)] if log.exists() else []
    return sorted({int(json.loads(line[len(ASK_PREFIX):])["id"].split("-")[0])
                   for line in asks})


def test_aa_passes_and_a_killed_arm_resumes(tmp_path):
    """A/A exits 0. The candidate worker is SIGKILLed after its first task: the run exits 4,
    keeps the baseline and the finished task, and the rerun reuses both. The first run
    starts its workers as fresh interpreters (no fork server: the default launch)."""
    config = write_config(tmp_path, "aa", PLAIN, PLAIN, tasks=REVIEWS_AND_ADDITION,
                          expect_identical_arms=True)
    reports = tmp_path / "reports"
    store = str(tmp_path / "store")  # its own: both arms must really run
    env = {k: v for k, v in os.environ.items() if k != FORK_SERVER_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "evals", "ab", str(config), "--reports",
                             str(reports), "--store", store], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 900
    killed = False
    while time.time() < deadline and proc.poll() is None:
        markers = list(reports.glob("*/arms/candidate/tasks/tiny_reviews_gen.json"))
        if markers:
            for pid in _worker_pids(markers[0].parent.parent):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
                killed = True
            if killed:
                break
        time.sleep(0.2)
    out, err = proc.communicate(timeout=300)
    assert killed, f"the candidate worker was never seen running:\n{out}\n{err}"
    assert proc.returncode == 4, (out, err)
    assert "Traceback" not in err
    run_dir = next(reports.glob("*/arms")).parent
    baseline = json.loads((run_dir / "arms/baseline/manifest.json").read_text("utf-8"))
    assert baseline["forked"] is False  # a fresh interpreter
    assert (run_dir / "arms/baseline/tasks/tiny_addition.json").exists()
    assert (run_dir / "arms/candidate/tasks/tiny_reviews_gen.json").exists()
    assert not (run_dir / "arms/candidate/tasks/tiny_addition.json").exists()

    again = run_cli("ab", str(config), "--reports", str(reports), "--store", store)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "baseline: reusing finished results" in again.stdout
    assert "task 1/1 tiny_addition" in again.stdout  # only the unfinished task ran
    summary = read_summary(reports)
    assert summary["verdict"] == "PASS"
    # identical arms: vLLM's once-per-process warnings are no difference between them
    assert not any("warned for the" in note for note in summary["preflight"]["audit"]["notes"])
    assert {t["task"] for t in summary["tasks"]} == {"tiny_reviews_gen", "tiny_addition"}
    assert all(t["n"] == LIMIT for t in summary["tasks"])
    assert (run_dir / "report.html").exists() and (run_dir / "junit.xml").exists()
    # the killed-and-resumed candidate equals the uninterrupted baseline (same config) item
    # by item: same scores and the same generated text
    rows = [json.loads(x) for x in
            (run_dir / "paired_items.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    assert len(rows) == 2 * LIMIT
    assert all(r["baseline"] == r["candidate"] and
               r["baseline_response"] == r["candidate_response"] for r in rows)


@pytest.mark.shown_command(
    "nox -s ab", "the default config's comparison (MTP + prefix caching vs neither, every "
    "bundled task) through `python -m evals ab`, at 200 items a task with the engine tests' "
    "eager engine and vLLM's default block size")
def test_mtp_prefix_runs_and_records_effective_configs(mtp_prefix_run):
    result, run_dir = mtp_prefix_run
    assert result.returncode in (0, 1, 3), result.stdout + result.stderr
    summary = read_summary(run_dir.parent)
    assert summary["exit_code"] == result.returncode
    base = summary["arms"]["baseline"]["effective_engine_config"]
    cand = summary["arms"]["candidate"]["effective_engine_config"]
    assert base["cache.enable_prefix_caching"] is False
    assert cand["cache.enable_prefix_caching"] is True
    assert cand["speculative.method"] == "mtp"
    assert summary["arms"]["candidate"]["spec_decode"]["vllm:spec_decode_num_draft_tokens"] > 0
    # exercise evidence per arm and task, from vLLM's own counters: with the CPU default
    # block (128 tokens) the ~330-token shared-prefix prompts reuse one cached block, the
    # short addition prompts none
    rows = {(r["arm"], r["task"]): r for r in summary["exercise"]["tasks"]}
    assert summary["exercise"]["declared"] == ["prefix caching", "speculative decoding"]
    shared = rows[("candidate", "tiny_reviews_shared_prefix")]
    assert 0.2 < shared["cached_share"] < 0.9 and shared["drafted_tokens"] > 0
    assert rows[("candidate", "tiny_addition")]["cached_tokens"] == 0
    assert rows[("candidate", "tiny_addition")]["acceptance"] > 0.5
    assert all(rows[("baseline", t)]["cached_tokens"] == 0 and not rows[("baseline", t)][
        "drafted_tokens"] for t in ("tiny_reviews_shared_prefix", "tiny_addition"))
    assert len(rows) == 2 * 4  # both arms, every bundled task
    assert summary["exercise"]["not_exercised"] == []
    assert "task tiny_addition: prefix caching did not engage" in result.stdout
    assert "EXERCISED" in result.stdout and "draft acceptance" in result.stdout
    for arm in ("baseline", "candidate"):
        versions = summary["arms"][arm]["versions"]
        assert {"vllm", "lm-eval", "torch"} <= set(versions)
        assert summary["arms"][arm]["model_hash"]
        assert all(t["wall_seconds"] > 0 for t in summary["arms"][arm]["tasks"].values())
    assert f"VERDICT: {summary['verdict']}" in result.stdout
    # the launcher's turn-taking (evals.runner.launch.run_arms_in_turn), on real engines: the
    # candidate's worker imported while the baseline ran, but built its engine only after
    # the baseline had finished, and the baseline's items ran only once it was imported
    base, cand = (summary["arms"][arm]["timeline"] for arm in ("baseline", "candidate"))
    assert cand["started"] < base["finished"] <= cand["engine_turn"]
    assert cand["imported"] <= base["go"]
    # both workers were forked from the session's fork server (tests/engine/conftest.py),
    # which had imported vLLM and lm-eval for them
    assert all(summary["arms"][arm]["forked"] for arm in ("baseline", "candidate"))
    # the audit's configs were resolved by the arms' own workers (no resolver process)
    assert summary["preflight"]["audit"]["resolved_in"] == {"baseline": "the arm's worker",
                                                           "candidate": "the arm's worker"}


@pytest.fixture(scope="module")
def regression_run(tmp_path_factory, degraded_model):
    """The shared baseline against the degraded model: a real regression."""
    root = tmp_path_factory.mktemp("regression")
    config = write_config(root, "regression", PLAIN,
                          {"model": str(degraded_model), "engine": PLAIN["engine"]},
                          tasks=REVIEWS_AND_ADDITION)
    result = run_cli("ab", str(config), "--reports", str(root / "reports"))
    return result, root / "reports"


def test_real_regression_exits_1_and_names_the_task(regression_run):
    result, reports = regression_run
    assert result.returncode == 1, result.stdout + result.stderr
    summary = read_summary(reports)
    regressed = [t["task"] for t in summary["tasks"] if t["verdict"] == "REGRESSION"]
    assert regressed
    for task in regressed:
        assert task in result.stdout.split("VERDICT:")[1]
    assert summary["verdict"] == "REGRESSION"


def test_compare_mode_on_lm_eval_outputs(regression_run, tmp_path):
    """`compare` on the two lm-eval `--log_samples` directories the regression run's arms
    wrote (lm-eval's own EvaluationTracker layout, as `lm_eval --log_samples` writes it)."""
    _, reports = regression_run
    (run_dir,) = [p.parent for p in reports.glob("*/summary.json")]
    a, b = run_dir / "arms/baseline/lm_eval", run_dir / "arms/candidate/lm_eval"
    result = run_cli("compare", str(a), str(b), "--reports", str(tmp_path / "reports"))
    assert result.returncode == 1, result.stdout + result.stderr
    summary = read_summary(tmp_path / "reports")
    assert summary["kind"] == "compare"
    assert {t["task"]: t["metric"] for t in summary["tasks"]} == {
        "tiny_addition": "exact_match", "tiny_reviews_gen": "exact_match"}
    assert "tiny_addition" in [t["task"] for t in summary["tasks"] if t["verdict"] == "REGRESSION"]
    assert all(t["n"] == LIMIT for t in summary["tasks"])
    # the same directory against itself: identical items, nothing flips
    same = run_cli("compare", str(a), str(a), "--reports", str(tmp_path / "reports-same"))
    same_summary = read_summary(tmp_path / "reports-same")
    assert all(t["correct_to_wrong"] == t["wrong_to_correct"] == 0
               for t in same_summary["tasks"]), same.stdout


def test_sequential_run_stops_a_real_regression_early(tmp_path, degraded_model):
    """Opt-in early stop on the full 1,200-item split: the noisy model's addition drop is
    established after a few chunks; the candidate runs far fewer items than the baseline."""
    config = write_config(tmp_path, "sequential", PLAIN,
                          {"model": str(degraded_model), "engine": PLAIN["engine"]},
                          tasks=[{"name": "tiny_addition", "metric": "exact_match"}],
                          limit=None, sequential={"chunk": 50})
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"))
    assert result.returncode == 1, result.stdout + result.stderr
    summary = read_summary(tmp_path / "reports")
    (task,) = summary["tasks"]
    looks = task["sequential"]
    assert looks["decision"] == "regression" and looks["n_items"] == 1200
    assert looks["items_used"] * 5 <= looks["n_items"], looks
    assert task["n"] == looks["items_used"]
    assert summary["arms"]["candidate"]["tasks"]["tiny_addition"]["items_run"] == task["n"]
    assert summary["arms"]["baseline"]["tasks"]["tiny_addition"]["items_run"] == 1200
    assert f"stopped after {task['n']} of 1200 items" in result.stdout
    save_artifact("sequential_regression.json", {"looks": looks, "delta": task["delta"]})
