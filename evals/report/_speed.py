"""Throughput of the two arms, from the per-task records in their manifests.

Only A/B runs measure time (compare runs start from finished lm-eval output). The
measure is generated tokens per second when both arms generated tokens, else scored
items per second (loglikelihood-only tasks generate nothing). Only tasks timed in
both arms count, so a task reused from a cache in one arm cannot skew the ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

from evals.report import _formatting as fmt


@dataclass(frozen=True, slots=True)
class SpeedChange:
    measure: str
    baseline: float
    candidate: float
    ratio: float
    tasks: tuple[str, ...]

    @property
    def text(self) -> str:
        return (f"{fmt.ratio(self.ratio)} {self.measure} (candidate {self.candidate:,.1f} vs "
                f"baseline {self.baseline:,.1f}, over {len(self.tasks)} task(s))")


def _task_records(arm: dict) -> dict[str, dict]:
    tasks = arm.get("tasks") if isinstance(arm, dict) else None
    return {k: v for k, v in (tasks or {}).items() if isinstance(v, dict)}


def _number(record: dict, key: str) -> float:
    value = record.get(key)
    return float(value) if fmt.finite(value) else 0.0


def _items(record: dict) -> float:
    n_samples = record.get("n_samples")
    if isinstance(n_samples, dict):
        return float(sum(v for v in n_samples.values() if fmt.finite(v)))
    return 0.0


def speed_change(arms: dict) -> SpeedChange | None:
    """Candidate/baseline throughput ratio, or None when the run did not time both arms."""
    base, cand = _task_records(arms.get("baseline", {})), _task_records(arms.get("candidate", {}))
    timed = tuple(sorted(t for t in set(base) & set(cand)
                         if _number(base[t], "wall_seconds") > 0
                         and _number(cand[t], "wall_seconds") > 0))
    if not timed:
        return None
    wall_b = sum(_number(base[t], "wall_seconds") for t in timed)
    wall_c = sum(_number(cand[t], "wall_seconds") for t in timed)
    tokens_b = sum(_number(base[t], "generated_tokens") for t in timed)
    tokens_c = sum(_number(cand[t], "generated_tokens") for t in timed)
    if tokens_b > 0 and tokens_c > 0:
        measure, work_b, work_c = "generated tokens per second", tokens_b, tokens_c
    else:
        measure = "scored items per second"
        work_b, work_c = sum(_items(base[t]) for t in timed), sum(_items(cand[t]) for t in timed)
        if work_b <= 0 or work_c <= 0:
            return None
    rate_b, rate_c = work_b / wall_b, work_c / wall_c
    return SpeedChange(measure=measure, baseline=rate_b, candidate=rate_c,
                       ratio=rate_c / rate_b, tasks=timed)
