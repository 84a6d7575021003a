"""`LoadCurveRecord`: summary.json's `load_curve`, the load sweep's figures (issue 55).

Typed like the rest of the run record (evals.record.run_record_model): every field has a
docstring, unknown keys are refused. Latencies are in seconds; figures the sweep could not
measure (a failed level, a level without a request of two or more tokens) are null.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


class LatencyRecord(BaseModel):
    """One latency over a level's finished requests (evals.stats.load_curve.LatencySummary)."""

    model_config = _CONFIG

    n: int = Field(description="Values it is computed from.")
    mean: float = Field(description="Mean, seconds.")
    p50: float = Field(description="Median, seconds.")
    p50_low: float = Field(description="Lower end of the median's bootstrap interval.")
    p50_high: float = Field(description="Upper end of the median's bootstrap interval.")
    p95: float = Field(description="95th percentile, seconds.")
    p95_low: float = Field(description="Lower end of the p95's bootstrap interval.")
    p95_high: float = Field(description="Upper end of the p95's bootstrap interval.")
    p99: float = Field(description="99th percentile, seconds.")
    p99_low: float = Field(description="Lower end of the p99's bootstrap interval.")
    p99_high: float = Field(description="Upper end of the p99's bootstrap interval.")


class LevelRecord(BaseModel):
    """One arm at one concurrency level."""

    model_config = _CONFIG

    concurrency: int = Field(description="Requests kept in flight.")
    status: Literal["ok", "failed"] = Field(description="failed: a request of the level "
                                            "failed (its figures are of the others).")
    error: str | None = Field(None, description="The server's first error, when failed.")
    requests: int = Field(description="Requests that finished.")
    failed_requests: int = Field(description="Requests that failed.")
    output_tokens: int = Field(description="Output tokens of the finished requests.")
    wall_seconds: float = Field(description="First request sent to last response ended.")
    requests_per_s: float | None = Field(None, description="Requests per second of wall time.")
    output_tokens_per_s: float | None = Field(None, description="Output tokens per second.")
    ttft: LatencyRecord | None = Field(None, description="Time to first token.")
    tpot: LatencyRecord | None = Field(None, description="Time per output token.")
    itl: LatencyRecord | None = Field(None, description="Gaps between streamed chunks.")
    e2e: LatencyRecord | None = Field(None, description="End-to-end latency.")
    running_max: float | None = Field(None, description="Most requests the server ran at "
                                      "once (its /metrics, read every half second).")
    waiting_max: float | None = Field(None, description="Longest queue the server reported.")
    kv_cache_usage_max: float | None = Field(None, description="Highest KV-cache usage, 0-1.")
    kv_cache_usage_mean: float | None = Field(None, description="Mean KV-cache usage, 0-1.")
    counters: dict[str, float] = Field(default_factory=dict, description="vLLM's counters "
                                       "over the level (preemptions, prefix-cache hits).")


class ArmCurveRecord(BaseModel):
    """One arm's sweep."""

    model_config = _CONFIG

    levels: list[LevelRecord] = Field(description="Per level, in rising concurrency.")
    slo_safe_concurrency: int | None = Field(None, description="The highest level whose TTFT "
                                             "and TPOT p95 meet the SLO; null: none does.")
    slo_confident_concurrency: int | None = Field(None, description="The highest level whose "
                                                  "p95s' bootstrap upper ends meet the SLO.")
    sweep_seconds: float | None = Field(None, description="The sweep's wall time.")
    accuracy_seconds: float | None = Field(None, description="The arm's accuracy items' wall "
                                           "time on the same server, before the sweep.")
    accuracy_requests: int | None = Field(None, description="Requests the server had served "
                                          "before the sweep (its warm state).")
    error: str | None = Field(None, description="Why the arm has no sweep, if so.")
    origin: Literal["ran", "rerun", "reused"] | None = Field(
        None, description="ran: after the arm's accuracy items on the same server; rerun: "
        "alone on a fresh server (the accuracy items were reused from the store); reused: the "
        "sweep recorded with the reused accuracy items (`speed.on_reuse`).")
    reused_run: str | None = Field(None, description="The run a reused sweep came from.")
    server_start_seconds: float | None = Field(None, description="The sweep's server start "
                                               "(a rerun pays it for the sweep alone).")


class SpeedupRecord(BaseModel):
    """Candidate over baseline at one level (evals.stats.load_curve.LevelSpeedup)."""

    model_config = _CONFIG

    concurrency: int = Field(description="The level.")
    speedup: float | None = Field(None, description="Output tokens per second of request "
                                  "time, candidate / baseline; null where a level failed.")
    low: float | None = Field(None, description="Lower end of its bootstrap interval.")
    high: float | None = Field(None, description="Upper end of its bootstrap interval.")


class CrossoverRecord(BaseModel):
    """Where the candidate stops being faster (evals.stats.load_curve.Crossover)."""

    model_config = _CONFIG

    kind: Literal["crossed", "faster_throughout", "slower_throughout", "not_faster_at_start",
                  "not_measured"] = Field(description="crossed, or why there is no crossover "
                                          "in the range.")
    concurrency: float | None = Field(None, description="The interpolated concurrency.")
    between: list[int] | None = Field(None, description="The two levels it lies between.")


class LoadCheckRecord(BaseModel):
    """One check of `gate.speed` (evals.decide.load_gate.LoadCheck)."""

    model_config = _CONFIG

    check: str = Field(description="What was required, in words.")
    measured: str = Field(description="What the sweep measured, in words.")
    outcome: Literal["met", "missed", "undecided"] = Field(description="The check's outcome.")


class LoadCurveRecord(BaseModel):
    """summary.json's `load_curve`: both arms' sweep, the speed-up, crossover and SLO."""

    model_config = _CONFIG

    levels: list[int] = Field(description="The concurrency levels swept.")
    requests_per_level: int = Field(description="Timed requests per level and arm.")
    prompts: str = Field(description="Where the prompts came from.")
    output_tokens: int = Field(description="Tokens generated per request (EOS ignored).")
    confidence: float = Field(description="Level of every interval.")
    slo_ttft_p95_ms: float | None = Field(None, description="The SLO's TTFT p95 target.")
    slo_tpot_p95_ms: float | None = Field(None, description="The SLO's TPOT p95 target.")
    arms: dict[str, ArmCurveRecord] = Field(description="baseline and candidate.")
    speedups: list[SpeedupRecord] = Field(description="Per level.")
    crossover: CrossoverRecord = Field(description="Where the candidate stops being faster.")
    notes: list[str] = Field(default_factory=list, description="What a reader should know.")
    gate: list[LoadCheckRecord] | None = Field(None, description="`gate.speed`'s checks, "
                                               "where the config has one.")


def _latency(summary) -> LatencyRecord | None:
    if summary is None:
        return None
    fields = {"n": summary.n, "mean": summary.mean}
    for name in ("p50", "p95", "p99"):
        p = getattr(summary, name)
        fields.update({name: p.value, f"{name}_low": p.low, f"{name}_high": p.high})
    return LatencyRecord(**fields)


def _level(level) -> LevelRecord:
    s = level.summary
    return LevelRecord(
        concurrency=s.concurrency, status=level.status, error=level.error,
        requests=s.requests, failed_requests=level.failed_requests,
        output_tokens=s.output_tokens, wall_seconds=s.wall_seconds,
        requests_per_s=s.requests_per_s, output_tokens_per_s=s.output_tokens_per_s,
        ttft=_latency(s.ttft), tpot=_latency(s.tpot), itl=_latency(s.itl), e2e=_latency(s.e2e),
        running_max=level.running_max, waiting_max=level.waiting_max,
        kv_cache_usage_max=level.kv_cache_usage_max,
        kv_cache_usage_mean=level.kv_cache_usage_mean, counters=level.counters)


def load_curve_record(curve, gate=None) -> LoadCurveRecord:
    """The record of an evals.analyse.load_curve.LoadCurve and, where the config gates it,
    its evals.decide.load_gate.LoadGateResult."""
    arms = {name: ArmCurveRecord(
        levels=[_level(lv) for lv in arm.levels],
        slo_safe_concurrency=arm.slo.safe_concurrency if arm.slo else None,
        slo_confident_concurrency=arm.slo.confident_concurrency if arm.slo else None,
        sweep_seconds=arm.sweep_seconds, accuracy_seconds=arm.accuracy_seconds,
        accuracy_requests=arm.accuracy_requests, error=arm.error, origin=arm.origin,
        reused_run=arm.reused_run, server_start_seconds=arm.server_start_seconds)
        for name, arm in curve.arms.items()}
    speedups = [SpeedupRecord(concurrency=c) if s is None else
                SpeedupRecord(concurrency=c, speedup=s.speedup, low=s.low, high=s.high)
                for c, s in zip(curve.levels, curve.speedups)]
    cross = curve.crossover
    return LoadCurveRecord(
        levels=list(curve.levels), requests_per_level=curve.requests_per_level,
        prompts=curve.prompts, output_tokens=curve.output_tokens, confidence=curve.confidence,
        slo_ttft_p95_ms=curve.slo_ttft_p95_ms, slo_tpot_p95_ms=curve.slo_tpot_p95_ms,
        arms=arms, speedups=speedups,
        crossover=CrossoverRecord(kind="not_measured") if cross is None else CrossoverRecord(
            kind=cross.kind, concurrency=cross.concurrency,
            between=list(cross.between) if cross.between else None),
        notes=list(curve.notes),
        gate=None if gate is None else [LoadCheckRecord(check=c.check, measured=c.measured,
                                                        outcome=c.outcome)
                                        for c in gate.checks])
