"""The distribution-shift analysis on real engines: per-token top-k log-probabilities
recorded beside the samples, a weakly noised copy of the shipped model flagged by the shift
test while the accuracy gate passes, `gate.logprob: fail` turning that PASS into a
REGRESSION, and an A/A that is not flagged."""

from __future__ import annotations

import json

import pytest

from engine_helpers import ENGINE, LIMIT, MODEL, REPO, read_summary, run_cli, write_config

from evals.pair.logprobs import read_task_logprobs

NOISED = REPO / "models" / "tiny-reviews-noised"
TASKS = [{"name": "tiny_reviews_gen", "metric": "exact_match"},
         {"name": "tiny_reviews_mc", "metric": "acc"}]
PLAIN = {"engine": {**ENGINE, "enable_prefix_caching": False}}
SHIFT = {"logprobs": 5, "noise_floor": True}


def _config(tmp_path, name, candidate, **gate):
    return write_config(tmp_path, name, PLAIN, candidate, tasks=TASKS, limit=LIMIT,
                        gate={"alpha": 0.05, "margin": 0.05, **gate},
                        intended_change=["model"] if candidate.get("model") else [],
                        expect_identical_arms=not candidate.get("model"), **SHIFT)


def test_a_noised_model_shifts_the_distributions_before_accuracy(tmp_path):
    noised = {**PLAIN, "model": str(NOISED)}
    reports = tmp_path / "warn"
    result = run_cli("ab", str(_config(tmp_path, "shift-warn", noised)), "--reports",
                     str(reports))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = read_summary(reports)
    run = next(reports.iterdir())
    # every generated item's tokens are recorded, and they are what lm-eval logged
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(MODEL))
    (samples_file,) = (run / "arms" / "baseline" / "lm_eval").rglob(
        "samples_tiny_reviews_gen_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    recorded = read_task_logprobs(run / "arms" / "baseline" / "logprobs" /
                                  "tiny_reviews_gen.jsonl")
    assert recorded.top_k == 5 and set(recorded.items) == {s["doc_id"] for s in samples}
    for sample in samples:
        generation = recorded.items[sample["doc_id"]]
        text = tokenizer.decode(list(generation.tokens), skip_special_tokens=True)
        assert text.strip().startswith(sample["resps"][0][0].strip())
        assert all(generation.tokens[i] == max(top, key=top.get)  # greedy: the top-1
                   for i, top in enumerate(generation.top))
    shift = {t["task"]: t for t in summary["shift"]["tasks"]}
    assert shift["tiny_reviews_gen"]["kind"] == "generation"
    assert shift["tiny_reviews_mc"]["kind"] == "choice"
    for task in shift.values():
        assert task["summary"]["mean_kl"] > 0
        assert task["pvalue_adjusted"] <= 0.05, task["test"]
    assert summary["verdict"] == "PASS"  # accuracy does not show it
    assert sum("distributions shifted" in w for w in summary["warnings"]) == 2
    html = (run / "report.html").read_text(encoding="utf-8")
    assert 'id="shift"' in html and "Flip-prone items" in html

    # the same arms (reused from the run store) with gate.logprob: fail
    reports = tmp_path / "fail"
    result = run_cli("ab", str(_config(tmp_path, "shift-fail", noised, logprob="fail")),
                     "--reports", str(reports))
    assert result.returncode == 1, result.stdout[-3000:]
    summary = read_summary(reports)
    assert "reused from" in result.stdout  # every arm came from the run store
    # a reused arm keeps its per-token log-probabilities: both tasks are tested again
    # (a reuse used to drop them, and the generation task lost its test silently)
    assert {t["task"] for t in summary["shift"]["tasks"] if t["test"]} == \
        {"tiny_reviews_gen", "tiny_reviews_mc"}, summary["shift"]
    assert summary["verdict"] == "REGRESSION" and "gate.logprob: fail" in summary["reason"]
    assert [g["gate"] for g in summary["gates"]][-1] == "logprob shift"


def test_an_aa_is_not_flagged(tmp_path):
    reports = tmp_path / "aa"
    result = run_cli("ab", str(_config(tmp_path, "shift-aa", PLAIN, logprob="fail")),
                     "--reports", str(reports))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = read_summary(reports)
    for task in summary["shift"]["tasks"]:
        assert task["pvalue_adjusted"] > 0.05, task["test"]
    assert not any("distributions shifted" in w for w in summary["warnings"])
    # the baseline's rerun sizes how far two engine starts differ in speed: recorded beside
    # the speedup, from the rerun's own request timings
    run = next(reports.iterdir())

    speed = summary["speed"]
    assert speed["tasks"] == ["tiny_reviews_gen"]  # the generated one: the other scores choices

    def mean_tpot(arm):
        tpots = [(r["e2e"] - r["ttft"]) / (r["output_tokens"] - 1)
                 for task in speed["tasks"]
                 for r in json.loads((run / "arms" / arm / "speed" / f"{task}.json")
                                     .read_text())["requests"] if r["output_tokens"] >= 2]
        return sum(tpots) / len(tpots)

    assert speed["rerun_speedup"] == pytest.approx(
        mean_tpot("baseline") / mean_tpot("baseline_rerun"), rel=1e-9)
    assert speed["gate_low"] is not None and speed["gate_low"] <= speed["ci_low"]
