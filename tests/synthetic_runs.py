"""Run directories with planted numbers, written by the suite's own writers.

summary.json starts from the recorded real run (tests/fixtures/run_w4a16: its arms with
effective engine configs, versions, model hashes and timings, and its config); the run
id, date, tasks and verdict are replaced. paired_items.jsonl is written by
`evals.record.run_record.write_run` from `PairedTask`s, exactly as a real run writes it.
Used by the store and trend tests and by benchmarks/bench_store.py.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from evals.pair.pairing import PairedTask
from evals.record.run_record import read_summary, write_run
from evals.record.run_record_model import RunRecord
from evals.pair.samples import SampleRecord
from evals.stats import tango_score_interval

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "run_w4a16"
PROMPT = ("Review: the battery was average and the screen was {adjective} . it is what it is "
          ".\nSentiment:")


@dataclass(frozen=True)
class PlantedTask:
    """One task's paired 2x2 table: n items, accuracy, flips each way, A/A noise floor."""

    name: str
    n: int
    correct_to_wrong: int
    wrong_to_correct: int
    accuracy: float = 0.7
    noise_flips: int | None = None
    verdict: str = "PASS"


@lru_cache(maxsize=1)
def _template() -> dict:
    return read_summary(FIXTURE)


def _records(task: PlantedTask, scores: np.ndarray, arm: str, text: bool) -> tuple:
    records = []
    for doc_id, score in enumerate(scores):
        label = "positive" if score else "negative"
        prompt = PROMPT.format(adjective=f"item{doc_id}") if text else ""
        records.append(SampleRecord(
            task=task.name, doc_id=doc_id, filter="none", metrics={"acc": float(score)},
            doc_hash=f"{doc_id:08x}", prompt_hash=f"{doc_id:08x}", target="positive",
            prediction=label, response=f" {label} ({arm})" if text else "", prompt=prompt))
    return tuple(records)


def paired_task(task: PlantedTask, rng: np.random.Generator, text: bool = True) -> PairedTask:
    baseline = np.zeros(task.n)
    baseline[rng.permutation(task.n)[: round(task.accuracy * task.n)]] = 1.0
    candidate = baseline.copy()
    correct, wrong = np.flatnonzero(baseline == 1), np.flatnonzero(baseline == 0)
    candidate[rng.choice(correct, task.correct_to_wrong, replace=False)] = 0.0
    candidate[rng.choice(wrong, task.wrong_to_correct, replace=False)] = 1.0
    return PairedTask(task=task.name, metric="acc", filter="none",
                      doc_ids=tuple(range(task.n)), baseline=baseline, candidate=candidate,
                      baseline_records=_records(task, baseline, "baseline", text),
                      candidate_records=_records(task, candidate, "candidate", text))


def _task_entry(task: PlantedTask, paired: PairedTask) -> dict:
    low, high = tango_score_interval(task.wrong_to_correct, task.correct_to_wrong, task.n, 0.9)
    return {
        "task": task.name, "metric": "acc", "filter": "none", "gated": True, "n": task.n,
        "binary": True, "baseline_mean": float(paired.baseline.mean()),
        "candidate_mean": float(paired.candidate.mean()),
        "delta": (task.wrong_to_correct - task.correct_to_wrong) / task.n,
        "ci_low": low, "ci_high": high, "ci_method": "Tango score interval (90%)",
        "correct_to_wrong": task.correct_to_wrong, "wrong_to_correct": task.wrong_to_correct,
        "flip_rate": (task.correct_to_wrong + task.wrong_to_correct) / task.n,
        "noise_flips": task.noise_flips,
        "noise_flip_rate": None if task.noise_flips is None else task.noise_flips / task.n,
        "verdict": task.verdict, "reason": "planted", "labels": None, "lengths": None,
    }


def write_synthetic_run(run_dir: Path, *, run_id: str, created: str, tasks: list[PlantedTask],
                        rng: np.random.Generator, config_name: str = "synthetic",
                        text: bool = True, extra: dict | None = None) -> Path:
    """Writes run_dir/summary.json and paired_items.jsonl; returns run_dir. `extra`: more
    summary keys (e.g. a drift run's `drift`, with `verdict`/`reason` overrides)."""
    summary = copy.deepcopy(_template())
    paired = [paired_task(t, rng, text) for t in tasks]
    entries = [_task_entry(t, p) for t, p in zip(tasks, paired)]
    verdicts = {e["verdict"] for e in entries}
    verdict = next((v for v in ("REGRESSION", "INCONCLUSIVE") if v in verdicts), "PASS")
    summary.update(run_id=run_id, created=created, tasks=entries, verdict=verdict,
                   exit_code={"PASS": 0, "REGRESSION": 1, "INCONCLUSIVE": 3}[verdict])
    summary["config"] = dict(summary["config"], name=config_name)
    summary.update(extra or {})
    for arm, info in summary["arms"].items():
        info["tasks"] = {t.name: {"task": t.name, "key": hashlib.sha256(
            f"{run_id}|{arm}|{t.name}".encode()).hexdigest()[:20]} for t in tasks}
    write_run(Path(run_dir), RunRecord.model_validate(summary), paired)
    return Path(run_dir)


def study_record(arm_name: str = "prefix_caching=on+decoding=mtp") -> dict:
    """A study.json as evals.pipelines.study writes it: a regressing combined arm (with text
    that must stay text), a failed arm, one significant interaction."""
    task = {"task": "t<b>", "metric": "acc", "gated": True, "verdict": "REGRESSION",
            "delta": -0.1, "ci_low": -0.13, "ci_high": -0.07, "regression_pvalue": 1e-9,
            "regression_pvalue_adjusted": 3e-9, "correct_to_wrong": 50, "wrong_to_correct": 2,
            "n": 500, "mde": 0.02, "baseline_mean": 0.8, "candidate_mean": 0.7}
    return {
        "schema_version": 1, "kind": "study", "run_id": "s-1", "name": "s", "config": "c.yaml",
        "baseline": "baseline", "arms": ["baseline", arm_name], "factors": {},
        "levels": {arm_name: {"prefix_caching": "on", "decoding": "mtp"}},
        "tasks": ["t<b>"], "gate": {"alpha": 0.05, "margin": 0.02, "correction": "holm",
                                    "family": "Holm over every gated (arm, task)"},
        "verdict": "REGRESSION", "exit_code": 1, "reason": f"regression in {arm_name}",
        "comparisons": [{"arm": arm_name, "run_id": "s-1.x", "dir": f"comparisons/{arm_name}",
                         "verdict": "REGRESSION", "exit_code": 1, "reason": "<script>x</script>",
                         "tasks": [task], "speed": {"tpot_speedup": 0.5, "ci_low": 0.4,
                                                    "ci_high": 0.625}},
                        {"arm": "broken", "verdict": "FAILED", "exit_code": 4,
                         "reason": "arm broken failed"}],
        "interactions": [{"task": "t<b>", "first": "prefix_caching=on",
                          "second": "decoding=mtp", "arms": {}, "n": 500,
                          "accuracy": {"neither": 0.8, "first_only": 0.8, "second_only": 0.8,
                                       "both": 0.7},
                          "contrast": -0.1, "ci_low": -0.12, "ci_high": -0.08, "pvalue": 1e-12,
                          "items_one": 40, "items_two": 5, "significant": True,
                          "sentence": "On t<b> the drop appears only with the combination"}],
        "failed": {"broken": "x"}, "wall_seconds": 12.0,
    }
