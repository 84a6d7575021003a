"""A load curve: latency and throughput per concurrency level, the speed-up between two
engines per level, where it crosses 1, and the highest concurrency that meets a latency SLO.

Arrays in, frozen results out; randomness only through the `numpy.random.Generator` given.

* Percentiles are numpy's linear interpolation (Hyndman & Fan 1996, definition 7; the
  default of `numpy.quantile`), and their intervals the percentile bootstrap (Efron &
  Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 13) over requests. A tail
  percentile of a few requests is a rough figure: its interval says how rough.
* Time per output token (TPOT) of a request is (end - first token) / (tokens - 1), as
  vLLM's benchmark defines it; the inter-token latency (ITL) pools the gaps between a
  request's successive streamed chunks (a chunk may carry several tokens under speculative
  decoding, as in vLLM's benchmark).
* Throughput of a level is its requests (output tokens) over the level's wall time, first
  request sent to last response ended: one measurement, no interval.
* The speed-up of a level is the candidate's output tokens per second of request time over
  the baseline's, (sum tokens / sum end-to-end) per arm, a ratio of ratio estimators with
  a percentile-bootstrap interval over requests resampled independently in each arm. In a
  closed loop at a fixed concurrency it is the throughput ratio measured per request.
* The crossover is the first concurrency where the speed-up, faster at the level before,
  falls below 1, interpolated linearly between the two levels.
* A level meets an SLO when its TTFT p95 and TPOT p95 are at or under the targets given;
  the SLO-safe concurrency is the highest level that meets it (the recipe: lower the
  concurrency until TTFT p95 meets the target), and the confident one the highest whose
  bootstrap upper ends meet it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .validation import check_confidence_level, check_generator, check_positive_int
from .intervals import DEFAULT_CONFIDENCE_LEVEL

QUANTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True, slots=True)
class Percentile:
    """One percentile of a latency and its percentile-bootstrap interval (seconds)."""

    q: float
    value: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """p50, p95 and p99 of one latency over a level's requests (seconds), and its mean."""

    n: int
    mean: float
    p50: Percentile
    p95: Percentile
    p99: Percentile


@dataclass(frozen=True, slots=True)
class LevelSummary:
    """One arm at one concurrency level."""

    concurrency: int
    requests: int
    """Requests that finished (failed ones are left out of every figure)."""
    output_tokens: int
    wall_seconds: float
    """First request sent to last response ended."""
    ttft: LatencySummary | None
    tpot: LatencySummary | None
    """None where no request produced two or more tokens."""
    itl: LatencySummary | None
    e2e: LatencySummary | None
    requests_per_s: float | None
    output_tokens_per_s: float | None


@dataclass(frozen=True, slots=True)
class LevelSpeedup:
    """Candidate over baseline at one level: output tokens per second of request time."""

    concurrency: int
    speedup: float
    low: float
    high: float
    confidence_level: float


@dataclass(frozen=True, slots=True)
class Crossover:
    """Where the candidate stops being faster than the baseline."""

    kind: Literal["crossed", "faster_throughout", "slower_throughout", "not_faster_at_start"]
    """crossed: faster at one level, slower at the next; faster_throughout: no crossover in
    the range; slower_throughout: not faster at any level; not_faster_at_start: slower (or
    equal) at the lowest level, faster somewhere above it, never falling back."""
    concurrency: float | None
    """The interpolated concurrency where the speed-up is 1 (crossed only)."""
    between: tuple[int, int] | None
    """The two levels it lies between (crossed only)."""


@dataclass(frozen=True, slots=True)
class SloResult:
    """One arm's highest concurrency that meets the SLO."""

    ttft_p95_target: float | None
    tpot_p95_target: float | None
    safe_concurrency: int | None
    """The highest level whose p95s meet the targets; None when no level does."""
    confident_concurrency: int | None
    """The highest level whose p95s' bootstrap upper ends meet the targets."""
    meets: tuple[bool, ...]
    """Per level, in order: whether its p95s meet the targets."""


def _check_array(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"`{name}` must be finite")
    return array


def latency_summary(values, rng: np.random.Generator, *, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
                    n_resamples: int = 2000) -> LatencySummary | None:
    """p50/p95/p99 of `values` with percentile-bootstrap intervals (resampling values);
    None for no values."""
    x = _check_array(values, "values")
    check_generator(rng)
    check_confidence_level(confidence_level)
    check_positive_int(n_resamples, "n_resamples")
    if x.size == 0:
        return None
    points = np.quantile(x, QUANTILES)
    draws = rng.integers(0, x.size, size=(n_resamples, x.size))
    boot = np.quantile(x[draws], QUANTILES, axis=1)  # (len(QUANTILES), n_resamples)
    tail = (1 - confidence_level) / 2
    lows = np.quantile(boot, tail, axis=1)
    highs = np.quantile(boot, 1 - tail, axis=1)
    p50, p95, p99 = (Percentile(q, float(v), float(lo), float(hi))
                     for q, v, lo, hi in zip(QUANTILES, points, lows, highs))
    return LatencySummary(n=int(x.size), mean=float(x.mean()), p50=p50, p95=p95, p99=p99)


def request_tpot(first, end, tokens) -> np.ndarray:
    """TPOT of each request with two or more output tokens, (end - first) / (tokens - 1)."""
    first, end = _check_array(first, "first"), _check_array(end, "end")
    tokens = _check_array(tokens, "tokens")
    keep = tokens >= 2
    return (end[keep] - first[keep]) / (tokens[keep] - 1)


def level_summary(concurrency: int, start, first, end, tokens, chunk_gaps, rng:
                  np.random.Generator, *, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
                  n_resamples: int = 2000) -> LevelSummary:
    """One level's figures from its finished requests: per request its start, first-token
    and end times (seconds, one clock) and output tokens, and the gaps between its
    successive streamed chunks (`chunk_gaps`, pooled over requests)."""
    start, first = _check_array(start, "start"), _check_array(first, "first")
    end, tok = _check_array(end, "end"), _check_array(tokens, "tokens")
    if not (start.size == first.size == end.size == tok.size):
        raise ValueError("`start`, `first`, `end` and `tokens` must have one entry per request")
    if np.any(first < start) or np.any(end < first):
        raise ValueError("each request must have start <= first token <= end")
    check_positive_int(concurrency, "concurrency")
    kw = {"confidence_level": confidence_level, "n_resamples": n_resamples}
    wall = float(end.max() - start.min()) if start.size else 0.0
    n_tokens = int(tok.sum())
    return LevelSummary(
        concurrency=int(concurrency), requests=int(start.size), output_tokens=n_tokens,
        wall_seconds=wall,
        ttft=latency_summary(first - start, rng, **kw),
        tpot=latency_summary(request_tpot(first, end, tok), rng, **kw),
        itl=latency_summary(_check_array(chunk_gaps, "chunk_gaps"), rng, **kw),
        e2e=latency_summary(end - start, rng, **kw),
        requests_per_s=start.size / wall if wall > 0 else None,
        output_tokens_per_s=n_tokens / wall if wall > 0 else None)


def _token_rate(e2e: np.ndarray, tokens: np.ndarray, axis=-1):
    return np.sum(tokens, axis=axis) / np.sum(e2e, axis=axis)


def level_speedup(concurrency: int, baseline_e2e, baseline_tokens, candidate_e2e,
                  candidate_tokens, rng: np.random.Generator, *,
                  confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
                  n_resamples: int = 2000) -> LevelSpeedup:
    """Candidate over baseline: (sum tokens / sum end-to-end) per arm, with a percentile
    bootstrap interval over requests resampled independently in each arm."""
    check_generator(rng)
    check_confidence_level(confidence_level)
    check_positive_int(n_resamples, "n_resamples")
    arms = []
    for name, e2e, tokens in (("baseline", baseline_e2e, baseline_tokens),
                              ("candidate", candidate_e2e, candidate_tokens)):
        e, t = _check_array(e2e, f"{name}_e2e"), _check_array(tokens, f"{name}_tokens")
        if e.size != t.size or e.size == 0:
            raise ValueError(f"`{name}_e2e` and `{name}_tokens` must be non-empty and of "
                             "one length")
        if e.sum() <= 0 or t.sum() <= 0:
            raise ValueError(f"the {name}'s requests took no time or produced no tokens")
        arms.append((e, t))
    (eb, tb), (ec, tc) = arms
    point = float(_token_rate(ec, tc) / _token_rate(eb, tb))
    ib = rng.integers(0, eb.size, size=(n_resamples, eb.size))
    ic = rng.integers(0, ec.size, size=(n_resamples, ec.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = _token_rate(ec[ic], tc[ic]) / _token_rate(eb[ib], tb[ib])
    boot = boot[np.isfinite(boot)]
    tail = (1 - confidence_level) / 2
    low, high = np.quantile(boot, [tail, 1 - tail])
    return LevelSpeedup(concurrency=int(concurrency), speedup=point, low=float(low),
                        high=float(high), confidence_level=confidence_level)


def check_levels(levels) -> tuple[int, ...]:
    """The concurrency levels as ints; a ValueError unless non-empty and strictly rising."""
    levels = tuple(int(c) for c in levels)
    if not levels:
        raise ValueError("no concurrency levels")
    if any(c < 1 for c in levels):
        raise ValueError("concurrency levels must be at least 1")
    if any(b <= a for a, b in zip(levels, levels[1:])):
        raise ValueError(f"concurrency levels must rise strictly, got {list(levels)}")
    return levels


def crossover(levels, speedups) -> Crossover:
    """Where the candidate stops being faster (speed-up below 1), interpolated linearly
    between the last faster level and the next one; or why there is none in the range."""
    levels = check_levels(levels)
    s = _check_array(speedups, "speedups")
    if s.size != len(levels):
        raise ValueError("one speed-up per level")
    faster = s > 1
    for i in range(len(levels) - 1):
        if faster[i] and s[i + 1] < 1:
            c0, c1 = levels[i], levels[i + 1]
            at = c0 + (1 - s[i]) * (c1 - c0) / (s[i + 1] - s[i])
            return Crossover("crossed", float(at), (c0, c1))
    if faster.all():
        return Crossover("faster_throughout", None, None)
    if not faster.any():
        return Crossover("slower_throughout", None, None)
    return Crossover("not_faster_at_start", None, None)


def slo_safe_concurrency(levels, ttft_p95, tpot_p95, *, ttft_p95_target: float | None = None,
                         tpot_p95_target: float | None = None, ttft_p95_high=None,
                         tpot_p95_high=None) -> SloResult:
    """The highest level whose TTFT p95 and TPOT p95 are at or under the targets given
    (seconds; a None target is not checked, a NaN p95 - not measured, a failed level - does
    not meet it); with the p95s' bootstrap upper ends, the highest confidently safe one."""
    levels = check_levels(levels)
    if ttft_p95_target is None and tpot_p95_target is None:
        raise ValueError("give ttft_p95_target, tpot_p95_target or both")
    for target in (ttft_p95_target, tpot_p95_target):
        if target is not None and not target > 0:
            raise ValueError("an SLO target must be positive")

    def meets(ttft, tpot) -> np.ndarray:
        ok = np.ones(len(levels), dtype=bool)
        for values, target in ((ttft, ttft_p95_target), (tpot, tpot_p95_target)):
            if target is None:
                continue
            v = np.asarray(values, dtype=float)
            if v.shape != (len(levels),):
                raise ValueError("one p95 per level")
            ok &= np.nan_to_num(v, nan=np.inf) <= target
        return ok

    def highest(ok: np.ndarray) -> int | None:
        return max((c for c, good in zip(levels, ok) if good), default=None)

    point = meets(ttft_p95, tpot_p95)
    confident = None
    if ttft_p95_high is not None or tpot_p95_high is not None:
        confident = highest(meets(ttft_p95 if ttft_p95_high is None else ttft_p95_high,
                                  tpot_p95 if tpot_p95_high is None else tpot_p95_high))
    return SloResult(ttft_p95_target=ttft_p95_target, tpot_p95_target=tpot_p95_target,
                     safe_concurrency=highest(point), confident_concurrency=confident,
                     meets=tuple(bool(x) for x in point))
