"""`python -m evals ab` and `compare` end to end on real engines: A/A, MTP + prefix caching,
a real regression, a crashed arm resumed, and two `lm_eval --log_samples` directories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from engine_helpers import (CPU_ENV, ENGINE, MODEL, REPO, read_summary, run_cli,
                            save_artifact, write_config)

REVIEWS_AND_ADDITION = [{"name": "tiny_reviews_gen", "metric": "exact_match"},
                        {"name": "tiny_addition", "metric": "exact_match"}]


def _worker_pids(arm_spec: Path) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"evals.runner.worker {arm_spec}"],
                         capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_aa_passes_and_a_killed_arm_resumes(tmp_path):
    """A/A exits 0. The candidate worker is SIGKILLed after its first task: the run exits 4,
    keeps the baseline and the finished task, and the rerun reuses both."""
    config = write_config(tmp_path, "aa", {"engine": {**ENGINE, "enable_prefix_caching": False}},
                          {"engine": {**ENGINE, "enable_prefix_caching": False}},
                          tasks=REVIEWS_AND_ADDITION, limit=300, expect_identical_arms=True)
    reports = tmp_path / "reports"
    proc = subprocess.Popen([sys.executable, "-m", "evals", "ab", str(config), "--reports",
                             str(reports)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 900
    killed = False
    while time.time() < deadline and proc.poll() is None:
        markers = list(reports.glob("*/arms/candidate/tasks/tiny_reviews_gen.json"))
        if markers:
            spec = markers[0].parent.parent / "spec.json"
            for pid in _worker_pids(spec):
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
    assert (run_dir / "arms/baseline/tasks/tiny_addition.json").exists()
    assert (run_dir / "arms/candidate/tasks/tiny_reviews_gen.json").exists()
    assert not (run_dir / "arms/candidate/tasks/tiny_addition.json").exists()

    again = run_cli("ab", str(config), "--reports", str(reports))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "baseline: reusing finished results" in again.stdout
    assert "task 1/1 tiny_addition" in again.stdout  # only the unfinished task ran
    summary = read_summary(reports)
    assert summary["verdict"] == "PASS"
    assert {t["task"] for t in summary["tasks"]} == {"tiny_reviews_gen", "tiny_addition"}
    assert all(t["n"] == 300 for t in summary["tasks"])
    assert (run_dir / "report.html").exists() and (run_dir / "junit.xml").exists()
    # the killed-and-resumed candidate equals the uninterrupted baseline (same config) item
    # by item: same scores and the same generated text
    rows = [json.loads(x) for x in
            (run_dir / "paired_items.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    assert len(rows) == 600
    assert all(r["baseline"] == r["candidate"] and
               r["baseline_response"] == r["candidate_response"] for r in rows)


def test_mtp_prefix_runs_and_records_effective_configs(tmp_path):
    config = write_config(
        tmp_path, "mtp", {"engine": {**ENGINE, "enable_prefix_caching": False}},
        {"engine": {**ENGINE, "enable_prefix_caching": True,
                    "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}},
        tasks=[{"name": "tiny_reviews_shared_prefix", "metric": "exact_match"},
               {"name": "tiny_addition", "metric": "exact_match"}], limit=200)
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"))
    assert result.returncode in (0, 1, 3), result.stdout + result.stderr
    summary = read_summary(tmp_path / "reports")
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
    assert summary["exercise"]["not_exercised"] == []
    assert "task tiny_addition: prefix caching did not engage" in result.stdout
    assert "EXERCISED" in result.stdout and "draft acceptance" in result.stdout
    for arm in ("baseline", "candidate"):
        versions = summary["arms"][arm]["versions"]
        assert {"vllm", "lm-eval", "torch"} <= set(versions)
        assert summary["arms"][arm]["model_hash"]
        assert all(t["wall_seconds"] > 0 for t in summary["arms"][arm]["tasks"].values())
    assert f"VERDICT: {summary['verdict']}" in result.stdout


def _degraded_copy(source: Path, target: Path, scale: float, seed: int = 0) -> Path:
    """The shipped model with Gaussian noise added to every decoder weight matrix."""
    target.mkdir()
    for item in source.iterdir():
        if item.is_file() and item.suffix != ".safetensors":
            (target / item.name).write_bytes(item.read_bytes())
    rng = np.random.default_rng(seed)
    import torch
    from safetensors.torch import load_file as load_torch
    from safetensors.torch import save_file as save_torch

    tensors = load_torch(str(source / "model.safetensors"))
    for name, tensor in tensors.items():
        if name.endswith("proj.weight") and ".layers." in name:
            noise = rng.normal(0.0, scale * float(tensor.float().std()), tuple(tensor.shape))
            tensors[name] = (tensor.float() + torch.from_numpy(noise).float()).to(tensor.dtype)
    save_torch(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


def test_real_regression_exits_1_and_names_the_task(tmp_path):
    degraded = _degraded_copy(MODEL, tmp_path / "noisy-model", scale=0.6)
    config = write_config(tmp_path, "regression", {"engine": dict(ENGINE)},
                          {"model": str(degraded), "engine": dict(ENGINE)},
                          tasks=REVIEWS_AND_ADDITION, limit=200)
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"))
    assert result.returncode == 1, result.stdout + result.stderr
    summary = read_summary(tmp_path / "reports")
    regressed = [t["task"] for t in summary["tasks"] if t["verdict"] == "REGRESSION"]
    assert regressed
    for task in regressed:
        assert task in result.stdout.split("VERDICT:")[1]
    assert summary["verdict"] == "REGRESSION"


def _lm_eval_cli(model: Path, output: Path) -> None:
    args = ",".join([f"pretrained={model}", "dtype=bfloat16", "max_model_len=1024",
                     "enable_prefix_caching=False", "seed=1234"])
    env = {**os.environ, **CPU_ENV, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "lm_eval", "run", "--model", "vllm", "--model_args",
                    args, "--tasks", "tiny_addition,tiny_reviews_mc", "--include_path",
                    str(REPO / "tasks"), "--limit", "150", "--log_samples", "--output_path",
                    str(output), "--seed", "1234"], check=True, cwd=REPO, env=env,
                   capture_output=True, timeout=900)


def test_compare_mode_on_lm_eval_cli_outputs(tmp_path):
    degraded = _degraded_copy(MODEL, tmp_path / "noisy-model", scale=0.6)
    _lm_eval_cli(MODEL, tmp_path / "a")
    _lm_eval_cli(degraded, tmp_path / "b")
    result = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--reports",
                     str(tmp_path / "reports"))
    assert result.returncode == 1, result.stdout + result.stderr
    summary = read_summary(tmp_path / "reports")
    assert summary["kind"] == "compare"
    assert {t["task"]: t["metric"] for t in summary["tasks"]} == {
        "tiny_addition": "exact_match", "tiny_reviews_mc": "acc"}
    assert "tiny_addition" in [t["task"] for t in summary["tasks"] if t["verdict"] == "REGRESSION"]
    assert all(t["n"] == 150 for t in summary["tasks"])
    # the same directory against itself: identical items, nothing flips
    same = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "a"), "--reports",
                   str(tmp_path / "reports-same"))
    same_summary = read_summary(tmp_path / "reports-same")
    assert all(t["correct_to_wrong"] == t["wrong_to_correct"] == 0
               for t in same_summary["tasks"]), same.stdout


def test_sequential_run_stops_a_real_regression_early(tmp_path):
    """Opt-in early stop on the full 1,200-item split: the noisy model's addition drop is
    established after a few chunks; the candidate runs far fewer items than the baseline."""
    degraded = _degraded_copy(MODEL, tmp_path / "noisy-model", scale=0.6)
    config = write_config(tmp_path, "sequential", {"engine": dict(ENGINE)},
                          {"model": str(degraded), "engine": dict(ENGINE)},
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
