"""The load curve of a run with `speed:`: both server arms' sweeps (evals.runner.load_sweep,
raw per-request timestamps in `<arm>/load_sweep.json`) turned into per-level latency and
throughput, the speed-up per level, the crossover and each arm's SLO-safe concurrency
(evals.stats.load_curve holds the statistics).

A level counts for the speed-up, the crossover and the SLO only where it finished in both
arms (a failed level is shown with its error and its finished requests' figures, and does
not meet the SLO).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from evals.schemas import LOAD_SWEEP
from evals.runner.layout import sweep_path
from evals.stats.load_curve import (Crossover, LevelSpeedup, LevelSummary, SloResult, crossover,
                                    level_speedup, level_summary, slo_safe_concurrency)
from evals.stats.intervals import DEFAULT_CONFIDENCE_LEVEL, interval_level

ARMS = ("baseline", "candidate")


@dataclass(frozen=True, slots=True)
class LevelLoad:
    """One arm at one level: its figures, its state and the server's metrics."""

    summary: LevelSummary
    status: str
    error: str | None
    failed_requests: int
    running_max: float | None
    waiting_max: float | None
    kv_cache_usage_max: float | None
    kv_cache_usage_mean: float | None
    counters: dict


@dataclass(frozen=True, slots=True)
class ArmLoad:
    levels: tuple[LevelLoad, ...]
    slo: SloResult | None
    sweep_seconds: float | None
    accuracy_seconds: float | None
    accuracy_requests: int | None
    error: str | None
    origin: str | None = None
    """ran (after the arm's accuracy items, same server), rerun (alone on a fresh server: the
    accuracy items were reused) or reused (the sweep recorded with the reused items)."""
    reused_run: str | None = None
    """The run a reused sweep came from."""
    server_start_seconds: float | None = None
    """What starting the sweep's server cost (a rerun pays it for the sweep alone)."""


@dataclass(frozen=True, slots=True)
class LoadCurve:
    levels: tuple[int, ...]
    requests_per_level: int
    prompts: str
    output_tokens: int
    confidence: float
    slo_ttft_p95_ms: float | None
    slo_tpot_p95_ms: float | None
    arms: dict[str, ArmLoad]
    speedups: tuple[LevelSpeedup | None, ...]
    crossover: Crossover | None
    """None where fewer than two levels were measured in both arms."""
    notes: tuple[str, ...]


def read_sweeps(arm_roots: dict[str, Path]) -> dict[str, dict | None]:
    """Each arm's raw sweep record (None where the arm has none: reused, or not a server)."""
    return {arm: LOAD_SWEEP.read(sweep_path(root)) if sweep_path(root).exists() else None
            for arm, root in arm_roots.items()}


def _max(values: list[float]) -> float | None:
    return float(max(values)) if values else None


def _level_load(level: dict, rng: np.random.Generator, confidence: float,
                n_resamples: int) -> LevelLoad:
    done = [r for r in level.get("requests", []) if not r.get("error")]
    gaps = [g for r in done for g in np.diff(np.asarray(r.get("chunks") or [], dtype=float))]
    summary = level_summary(
        int(level["concurrency"]), [r["start"] for r in done], [r["first"] for r in done],
        [r["end"] for r in done], [int(r["output_tokens"]) for r in done], gaps, rng,
        confidence_level=confidence, n_resamples=n_resamples)
    gauges = level.get("gauges") or []
    kv = [float(g["kv_cache_usage"]) for g in gauges if "kv_cache_usage" in g]
    return LevelLoad(
        summary=summary, status=str(level.get("status", "failed")), error=level.get("error"),
        failed_requests=sum(1 for r in level.get("requests", []) if r.get("error")),
        running_max=_max([float(g["running"]) for g in gauges if "running" in g]),
        waiting_max=_max([float(g["waiting"]) for g in gauges if "waiting" in g]),
        kv_cache_usage_max=_max(kv), kv_cache_usage_mean=float(np.mean(kv)) if kv else None,
        counters=dict(level.get("counters") or {}))


def _p95s(arm: ArmLoad, attr: str) -> tuple[list[float], list[float]]:
    values, highs = [], []
    for level in arm.levels:
        latency = getattr(level.summary, attr)
        ok = level.status == "ok" and latency is not None
        values.append(latency.p95.value if ok else float("nan"))
        highs.append(latency.p95.high if ok else float("nan"))
    return values, highs


def analyse_load_curve(sweeps: dict[str, dict | None], *, levels: list[int],
                       requests_per_level: int, slo_ttft_p95_ms: float | None,
                       slo_tpot_p95_ms: float | None, rng: np.random.Generator,
                       confidence: float = DEFAULT_CONFIDENCE_LEVEL, n_resamples: int = 2000) -> LoadCurve:
    """Both arms' sweeps (evals.runner.load_sweep records) as a load curve."""
    notes: list[str] = []
    arms: dict[str, ArmLoad] = {}
    prompts, output_tokens = "", 0
    for name in ARMS:
        raw = sweeps.get(name)
        if raw is None:
            arms[name] = ArmLoad((), None, None, None, None, error="no sweep: none was "
                                 "recorded in the arm's folder (its worker stopped before "
                                 "it; `--fresh` runs it)")
            continue
        prompts, output_tokens = raw.get("prompts", prompts), raw.get("output_tokens", 0)
        by_level = {int(lv["concurrency"]): lv for lv in raw.get("results", [])}
        loads = tuple(_level_load(by_level[c], rng, confidence, n_resamples)
                      for c in levels if c in by_level)
        warm = raw.get("warm_state") or {}
        arms[name] = ArmLoad(loads, None, raw.get("wall_seconds"),
                             warm.get("accuracy_seconds"), warm.get("accuracy_requests"),
                             error=f"no sweep: {raw['error']}" if raw.get("error") else None,
                             origin=raw.get("origin", "ran"), reused_run=raw.get("reused_run"),
                             server_start_seconds=warm.get("server_start_seconds"))
    for name, arm in arms.items():
        measured = tuple(lv.summary.concurrency for lv in arm.levels)
        if arm.levels and (slo_ttft_p95_ms is not None or slo_tpot_p95_ms is not None):
            ttft, ttft_high = _p95s(arm, "ttft")
            tpot, tpot_high = _p95s(arm, "tpot")
            slo = slo_safe_concurrency(
                measured, ttft, tpot,
                ttft_p95_target=None if slo_ttft_p95_ms is None else slo_ttft_p95_ms / 1000,
                tpot_p95_target=None if slo_tpot_p95_ms is None else slo_tpot_p95_ms / 1000,
                ttft_p95_high=ttft_high, tpot_p95_high=tpot_high)
            arms[name] = replace(arm, slo=slo)
    speedups: list[LevelSpeedup | None] = []
    base = {lv.summary.concurrency: lv for lv in arms["baseline"].levels}
    cand = {lv.summary.concurrency: lv for lv in arms["candidate"].levels}
    raw_b, raw_c = sweeps.get("baseline") or {}, sweeps.get("candidate") or {}
    for c in levels:
        b, k = base.get(c), cand.get(c)
        if b is None or k is None or b.status != "ok" or k.status != "ok":
            speedups.append(None)
            continue
        eb, tb = _e2e_tokens(raw_b, c)
        ec, tc = _e2e_tokens(raw_c, c)
        speedups.append(level_speedup(c, eb, tb, ec, tc, rng, confidence_level=confidence,
                                      n_resamples=n_resamples))
    measured = [(s.concurrency, s.speedup) for s in speedups if s is not None]
    cross = None
    if len(measured) >= 2:
        cross = crossover([c for c, _ in measured], [s for _, s in measured])
    else:
        notes.append("fewer than two levels finished in both arms: no crossover")
    notes.extend(f"{name}: {arm.error}" for name, arm in arms.items() if arm.error)
    failed = [f"{name} at concurrency {lv.summary.concurrency}: {lv.error}"
              for name, arm in arms.items() for lv in arm.levels if lv.status != "ok"]
    notes.extend(f"level failed, {f}" for f in failed)
    return LoadCurve(levels=tuple(levels), requests_per_level=requests_per_level,
                     prompts=prompts, output_tokens=int(output_tokens), confidence=confidence,
                     slo_ttft_p95_ms=slo_ttft_p95_ms, slo_tpot_p95_ms=slo_tpot_p95_ms,
                     arms=arms, speedups=tuple(speedups), crossover=cross, notes=tuple(notes))


def _e2e_tokens(raw: dict, concurrency: int) -> tuple[list[float], list[int]]:
    level = next(lv for lv in raw["results"] if int(lv["concurrency"]) == concurrency)
    done = [r for r in level["requests"] if not r.get("error")]
    return [r["end"] - r["start"] for r in done], [int(r["output_tokens"]) for r in done]


def load_curve_of(config, arm_roots: dict[str, Path]) -> LoadCurve | None:
    """The load curve of a run with `speed:` (evals.plan.config.SpeedSweepConfig) from its
    arms' folders; None without `speed:`. Intervals at the speed gate's level. `config`:
    what has `speed`, `seed` and `gate` (a RunPlan, or an ABConfig)."""
    speed = config.speed
    if speed is None:
        return None
    from evals.analyse.task_analysis import task_rng

    slo = speed.slo
    return analyse_load_curve(
        read_sweeps({arm: Path(arm_roots[arm]) for arm in ARMS}), levels=list(speed.concurrency),
        requests_per_level=speed.requests_per_level,
        slo_ttft_p95_ms=slo.ttft_p95_ms if slo else None,
        slo_tpot_p95_ms=slo.tpot_p95_ms if slo else None,
        rng=task_rng(config.seed, "load curve"), confidence=interval_level(config.gate.alpha))
