"""Sampling on the real engine (issue 53): an A/A with a chat template, a system prompt,
temperature 1 and 4 repeats per item ends with a verdict; repeat r of an item has the same
per-request seed in both arms, so the two engine runs reproduce every sample, while the
repeats of an item differ. And `compare` reads what lm-eval's own CLI writes with
`--apply_chat_template` and a task's `repeats`: a filter must be named, a repeats mismatch
is refused naming both directories."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from engine_helpers import CPU_ENV, ENGINE, MODEL, REPO, read_summary, run_cli, write_config

TEMPLATE = REPO / "configs" / "cpu" / "tiny_chat_template.jinja"
SYSTEM = "Answer with one word or number."
# vLLM's CPU backend cannot rewind a seeded request's generator after a partial prefill
# (configs/cpu/sampled_mtp_prefix.yaml says more): every seeded arm turns chunked prefill off
SAMPLED_ENGINE = {**ENGINE, "enable_chunked_prefill": False}
ITEMS = 8
REPEATS = 4


def _repeats(run_dir: Path, arm: str) -> dict:
    path = run_dir / "arms" / arm / "repeats" / "tiny_addition.json"
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_sampled_chat_aa_reproduces_every_sample_and_passes(tmp_path):
    arm = {"engine": SAMPLED_ENGINE}
    config = write_config(
        tmp_path, "sampled-aa", arm, arm, tasks=[{"name": "tiny_addition",
                                                   "metric": "exact_match"}],
        limit=ITEMS, expect_identical_arms=True, intended_change=[],
        chat={"template": str(TEMPLATE), "system": SYSTEM},
        decoding={"temperature": 1.0, "top_p": 0.95}, repeats=REPEATS,
        # 8 unchanged items bound a drop at 25 pts (as 8 0/1 items with no flip): a margin
        # they can show, so the repeats path reaches PASS
        gate={"alpha": 0.05, "margin": 0.3})
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"), "--store",
                     str(tmp_path / "store"))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = read_summary(tmp_path / "reports")
    (task,) = summary["tasks"]
    assert task["verdict"] == "PASS" and task["n"] == ITEMS
    assert task["repeats"]["repeats"] == REPEATS and "repeats" in task["regression_test"]
    assert task["answer_distribution"]["pvalue"] == 1.0  # identical samples: nothing moved
    run_dir = next((tmp_path / "reports").glob("*/summary.json")).parent
    base, cand = _repeats(run_dir, "baseline"), _repeats(run_dir, "candidate")
    assert base["repeats"] == REPEATS
    # two engine runs, the same seed per (item, repeat): every sample reproduced
    assert [i["responses"] for i in base["items"]] == [i["responses"] for i in cand["items"]]
    # ... and the repeats of an item are distinct samples, not one answer k times
    assert any(len(set(i["responses"])) > 1 for i in base["items"]), base["items"]
    for name in ("baseline", "candidate"):
        sampling = summary["arms"][name]["sampling"]
        assert sampling["decoding"] == {"temperature": 1.0, "top_p": 0.95}
        assert sampling["chat"]["template"] == str(TEMPLATE) and sampling["per_request_seeds"]
    prompt = json.loads(next(run_dir.glob("arms/baseline/lm_eval/*/samples_tiny_addition_*"
                                          ".jsonl")).read_text().splitlines()[0])
    assert prompt["arguments"]["gen_args_0"]["arg_0"].startswith(SYSTEM + "\nAdd: ")
    # the report plots the per-item rate differences: every item on zero
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert '<section id="rates">' in page
    assert f"{ITEMS} items, {REPEATS} repeats each: the rate fell at 0, rose at 0" in page


WAVE_TASK = "recall_multiturn_b128"
PER_WAVE = 2  # `limit` applies per wave: 4 items in two lm-eval calls


def test_a_wave_tasks_repeats_are_scored_in_every_wave_and_paired(tmp_path):
    # a wave task (tasks/recall) runs one lm-eval call per wave; each call's repeat scores
    # are kept under the items' indices in the task and merged, so the pairing sees them all
    arm = {"engine": SAMPLED_ENGINE}
    config = write_config(
        tmp_path, "sampled-waves", arm, arm, tasks=[{"name": WAVE_TASK,
                                                      "metric": "exact_match"}],
        limit=PER_WAVE, expect_identical_arms=True, intended_change=[],
        decoding={"temperature": 1.0, "top_p": 0.95}, repeats=2)
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"), "--store",
                     str(tmp_path / "store"))
    # the dense model cannot recall (it scores at the floor): PASS or INCONCLUSIVE
    assert result.returncode in (0, 3), result.stdout + result.stderr
    (task,) = read_summary(tmp_path / "reports")["tasks"]
    assert task["n"] == 2 * PER_WAVE and task["repeats"]["repeats"] == 2
    run_dir = next((tmp_path / "reports").glob("*/summary.json")).parent
    samples = next(run_dir.glob(f"arms/baseline/lm_eval/*/samples_{WAVE_TASK}_*.jsonl"))
    logged = sorted(json.loads(line)["doc_id"] for line in samples.read_text().splitlines())
    scored = {}
    for name in ("baseline", "candidate"):
        path = run_dir / "arms" / name / "repeats" / f"{WAVE_TASK}.json"
        scored[name] = json.loads(path.read_text(encoding="utf-8"))
        assert scored[name]["repeats"] == 2
        # one item per logged sample, under the doc_id lm-eval logged it with
        assert [i["doc_id"] for i in scored[name]["items"]] == logged
        assert all(len(i["responses"]) == 2 for i in scored[name]["items"])
    assert len(set(logged)) == 2 * PER_WAVE
    assert [i["responses"] for i in scored["baseline"]["items"]] == \
        [i["responses"] for i in scored["candidate"]["items"]]


def _lm_eval_run(tmp_path: Path, name: str, model: Path, include: Path, task: str) -> Path:
    """lm-eval's own CLI, as a user runs it: chat template, system prompt, sampling."""
    out = tmp_path / name
    args = ",".join(f"{k}={v}" for k, v in {"pretrained": model, **SAMPLED_ENGINE}.items())
    command = [sys.executable, "-m", "lm_eval", "run", "--model", "vllm", "--model_args", args,
               "--tasks", task, "--include_path", str(include), "--limit", str(ITEMS),
               "--apply_chat_template", "--system_instruction", SYSTEM,
               "--gen_kwargs", "temperature=1.0,do_sample=True", "--log_samples",
               "--output_path", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=900,
                          env={**os.environ, **CPU_ENV})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_compare_reads_lm_eval_cli_outputs_with_a_chat_template_and_repeats(tmp_path):
    model = tmp_path / "tiny-chat"
    shutil.copytree(MODEL, model)  # the embedded model, with a chat template of its own
    shutil.copy(TEMPLATE, model / "chat_template.jinja")
    include = tmp_path / "tasks"
    include.mkdir()
    task = "tiny_addition_sampled"
    (include / f"{task}.yaml").write_text(yaml.safe_dump({
        "include": str(REPO / "tasks" / "embedded" / "tiny_addition.yaml"), "task": task,
        "repeats": REPEATS,
        "filter_list": [
            {"name": "score-first", "filter": [{"function": "remove_whitespace"},
                                               {"function": "take_first"}]},
            {"name": f"maj@{REPEATS}", "filter": [{"function": "remove_whitespace"},
                                                   {"function": "majority_vote"},
                                                   {"function": "take_first"}]}]}))
    base = _lm_eval_run(tmp_path, "baseline", model, include, task)
    row = json.loads(next(base.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()[0])
    assert len(row["resps"][0]) == REPEATS and row["arguments"]["gen_args_0"]["arg_0"].startswith(
        SYSTEM + "\n")
    # a copy of the same run as the candidate: compare pairs it item by item
    cand = tmp_path / "candidate"
    shutil.copytree(base, cand)
    unnamed = run_cli("compare", str(base), str(cand), "--reports", str(tmp_path / "r1"))
    assert unnamed.returncode == 2, unnamed.stdout + unnamed.stderr
    assert f"several filters (maj@{REPEATS}, score-first)" in unnamed.stderr
    assert "Traceback" not in unnamed.stderr
    named = run_cli("compare", str(base), str(cand), "--metric",
                    f"{task}=exact_match,maj@{REPEATS}", "--reports", str(tmp_path / "r2"))
    assert named.returncode in (0, 3), named.stdout + named.stderr
    (gated,) = read_summary(tmp_path / "r2")["tasks"]
    assert gated["filter"] == f"maj@{REPEATS}" and gated["n"] == ITEMS
    assert gated["correct_to_wrong"] == gated["wrong_to_correct"] == 0
    # the candidate logged fewer repeats per item: refused, naming both directories
    samples = next(cand.rglob(f"samples_{task}_*.jsonl"))
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    for r in rows:
        r["resps"] = [r["resps"][0][:2]]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mismatch = run_cli("compare", str(base), str(cand), "--metric",
                       f"{task}=exact_match,maj@{REPEATS}", "--reports", str(tmp_path / "r3"))
    assert mismatch.returncode == 2, mismatch.stdout + mismatch.stderr
    assert f"{REPEATS} repeat(s) per item in {base}" in mismatch.stderr
    assert f"and 2 in {cand}" in mismatch.stderr and "Traceback" not in mismatch.stderr
