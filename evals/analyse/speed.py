"""Speed beside accuracy: per-arm latency and throughput, and the candidate's speedup.

Inputs are the per-request timings the runner recorded for each task (`<arm>/speed/
<task>.json`: time to first token, end-to-end latency and output tokens per request;
from vLLM's request metrics offline, from streamed responses in server mode) and the
spec-decode counters of the arm's manifest. Only tasks timed in both arms count.

The speedup is mean time per output token (TPOT), baseline over candidate (above 1:
the candidate is faster), with a percentile bootstrap interval over requests resampled
independently in each arm (scipy.stats.bootstrap). Throughput (output tokens per
second of task wall time) is one measurement per arm and gets no interval.

`describe_speedup` is the one wording of a speedup that the verdict, the reports and the
terminal share: "candidate 1.69x slower per output token (90% interval 1.64-1.75x)",
the factor always at least 1 and the direction in words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evals.stats.intervals import DEFAULT_CONFIDENCE_LEVEL


@dataclass(frozen=True, slots=True)
class ArmSpeed:
    arm: str
    requests: int
    output_tokens: int
    wall_seconds: float
    ttft_p50: float | None
    ttft_p95: float | None
    tpot_p50: float | None
    tpot_p95: float | None
    tpot_mean: float | None
    output_tokens_per_s: float | None
    requests_per_s: float | None
    acceptance_rate: float | None
    """Accepted / drafted speculative tokens, where vLLM reports them."""


@dataclass(frozen=True, slots=True)
class SpeedComparison:
    baseline: ArmSpeed
    candidate: ArmSpeed
    tasks: tuple[str, ...]
    tpot_speedup: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    throughput_ratio: float | None
    min_speedup: float | None
    gate: str | None
    """'met', 'missed' (interval below the minimum), 'undecided', or None (no minimum)."""
    note: str | None
    rerun_speedup: float | None = None
    """The baseline's rerun against the baseline (an A/A: baseline TPOT / rerun TPOT), where
    the run has one (`noise_floor: true`): how far two engine starts of one config differ."""
    gate_low: float | None = None
    gate_high: float | None = None
    """The interval the gate decides on: the speedup's interval widened on both sides by
    the A/A's factor (max(r, 1/r) for the rerun's speedup r)."""


def _tpot(request: dict) -> float | None:
    tokens = int(request.get("output_tokens") or 0)
    if tokens < 2:
        return None
    return (float(request["e2e"]) - float(request["ttft"])) / (tokens - 1)


def _quantile(values: np.ndarray, q: float) -> float | None:
    return float(np.quantile(values, q)) if values.size else None


def _acceptance(spec_decode: dict | None) -> float | None:
    spec_decode = spec_decode or {}
    drafted = float(spec_decode.get("vllm:spec_decode_num_draft_tokens", 0.0))
    accepted = float(spec_decode.get("vllm:spec_decode_num_accepted_tokens", 0.0))
    return accepted / drafted if drafted > 0 else None


def tpot_values(task_speeds: list[dict]) -> np.ndarray:
    values = [_tpot(r) for t in task_speeds for r in t["requests"]]
    return np.asarray([v for v in values if v is not None], dtype=float)


def arm_speed(arm: str, task_speeds: list[dict], spec_decode: dict | None) -> ArmSpeed:
    requests = [r for t in task_speeds for r in t["requests"]]
    ttft = np.asarray([float(r["ttft"]) for r in requests], dtype=float)
    tpot = tpot_values(task_speeds)
    tokens = int(sum(int(r.get("output_tokens") or 0) for r in requests))
    wall = float(sum(float(t["wall_seconds"]) for t in task_speeds))
    return ArmSpeed(
        arm=arm, requests=len(requests), output_tokens=tokens, wall_seconds=wall,
        ttft_p50=_quantile(ttft, 0.5), ttft_p95=_quantile(ttft, 0.95),
        tpot_p50=_quantile(tpot, 0.5), tpot_p95=_quantile(tpot, 0.95),
        tpot_mean=float(tpot.mean()) if tpot.size else None,
        output_tokens_per_s=tokens / wall if wall > 0 and tokens else None,
        requests_per_s=len(requests) / wall if wall > 0 else None,
        acceptance_rate=_acceptance(spec_decode))


def _ratio_of_means(b, c, axis=-1):
    return np.mean(b, axis=axis) / np.mean(c, axis=axis)


def compare_speed(baseline: dict[str, dict], candidate: dict[str, dict], *,
                  spec_decode: dict[str, dict | None], rng: np.random.Generator,
                  confidence: float = DEFAULT_CONFIDENCE_LEVEL, n_resamples: int = 2000,
                  min_speedup: float | None = None,
                  rerun: dict[str, dict] | None = None) -> SpeedComparison | None:
    """`baseline`/`candidate` (and the baseline's `rerun`, if any): {task: speed record}.
    None when no task was timed in both.

    The bootstrap interval covers the requests of one engine start per arm; two starts of
    the same engine differ by more (GPU A/As in benchmarks/results: 0.79x to 1.41x, each
    with an interval of a few percent). So `min_speedup` is decided on the interval
    widened by the rerun's own A/A factor, and without a rerun it stays undecided (the
    config check asks for `noise_floor: true` with `gate.min_speedup`)."""
    tasks = tuple(sorted(set(baseline) & set(candidate)))
    if not tasks:
        return None
    b_speeds = [baseline[t] for t in tasks]
    c_speeds = [candidate[t] for t in tasks]
    b = arm_speed("baseline", b_speeds, spec_decode.get("baseline"))
    c = arm_speed("candidate", c_speeds, spec_decode.get("candidate"))
    tb, tc = tpot_values(b_speeds), tpot_values(c_speeds)
    speedup = low = high = None
    note = None
    if tb.size >= 2 and tc.size >= 2 and tc.mean() > 0:
        from scipy import stats as sps  # here: the report's speed lines need no scipy

        speedup = float(tb.mean() / tc.mean())
        result = sps.bootstrap((tb, tc), _ratio_of_means, paired=False, vectorized=True,
                               n_resamples=n_resamples, confidence_level=confidence,
                               method="percentile", rng=rng)
        low = float(result.confidence_interval.low)
        high = float(result.confidence_interval.high)
    else:
        note = "fewer than two requests with two or more output tokens in an arm: no TPOT"
    throughput = (c.output_tokens_per_s / b.output_tokens_per_s
                  if b.output_tokens_per_s and c.output_tokens_per_s else None)
    rerun_speedup = _rerun_speedup(tb, rerun or {}, tasks)
    gate_low = gate_high = None
    if low is not None and high is not None and rerun_speedup is not None:
        factor = max(rerun_speedup, 1 / rerun_speedup)
        gate_low, gate_high = low / factor, high * factor
    gate = None
    if min_speedup is not None:
        if gate_low is None:
            gate = "undecided"
        elif gate_low >= min_speedup:
            gate = "met"
        elif gate_high < min_speedup:
            gate = "missed"
        else:
            gate = "undecided"
    return SpeedComparison(baseline=b, candidate=c, tasks=tasks, tpot_speedup=speedup,
                           ci_low=low, ci_high=high, confidence=confidence,
                           throughput_ratio=throughput, min_speedup=min_speedup, gate=gate,
                           note=note, rerun_speedup=rerun_speedup, gate_low=gate_low,
                           gate_high=gate_high)


def _rerun_speedup(tb: np.ndarray, rerun: dict[str, dict],
                   tasks: tuple[str, ...]) -> float | None:
    """Baseline TPOT / rerun TPOT over the tasks timed in both arms (`tb`: the baseline's
    TPOTs on them), or None unless the rerun timed every one of them."""
    if not all(t in rerun for t in tasks):
        return None
    tr = tpot_values([rerun[t] for t in tasks])
    if tb.size < 2 or tr.size < 2 or not tr.mean() > 0 or not tb.mean() > 0:
        return None
    return float(tb.mean() / tr.mean())


def _factor(ratio: float) -> tuple[str, str]:
    """A ratio candidate/baseline as a factor of at least 1 and its direction in words:
    1.3 -> ('1.30', 'faster'), 0.59 -> ('1.69', 'slower'); ('1.00', 'as fast') when it
    rounds to one."""
    factor = ratio if ratio >= 1 else 1 / ratio
    text = f"{factor:.2f}"
    if text == "1.00":
        return text, "as fast"
    return text, "faster" if ratio > 1 else "slower"


def _phrase(ratio: float) -> str:
    text, direction = _factor(ratio)
    return direction if direction == "as fast" else f"{text}x {direction}"


def _usable(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x) and x > 0


def describe_speedup(speedup, low=None, high=None, confidence=None,
                     unit: str = "per output token") -> str:
    """The speedup (baseline time / candidate time, or candidate rate / baseline rate) in
    words a release manager reads: 'candidate 1.30x faster per output token (95% interval
    1.20-1.40x)', 'candidate 1.69x slower per output token (95% interval 1.64-1.75x)';
    an interval that holds both directions reads 'interval 1.05x slower to 1.15x faster'."""
    if not _usable(speedup):
        return f"speed {unit} not measured"
    text, direction = _factor(float(speedup))
    head = (f"candidate as fast as the baseline {unit}" if direction == "as fast"
            else f"candidate {text}x {direction} {unit}")
    if not (_usable(low) and _usable(high)):
        return head
    level = f"{float(confidence):.0%} interval" if _usable(confidence) else "interval"
    (low_text, low_dir), (high_text, high_dir) = _factor(float(low)), _factor(float(high))
    if direction != "as fast" and low_dir == high_dir == direction:
        ends = sorted((low_text, high_text), key=float)
        return f"{head} ({level} {ends[0]}-{ends[1]}x)"
    ends = (_phrase(float(low)), _phrase(float(high)))
    span = ends[0] if ends[0] == ends[1] else f"{ends[0]} to {ends[1]}"
    return f"{head} ({level} {span})"


def describe_requirement(min_speedup: float) -> str:
    """A config's `min_speedup` in the same words: 1.2 -> 'at least 1.2x faster',
    1 -> 'at least as fast', 0.9 -> 'at most 1.11x slower'."""
    if min_speedup == 1:
        return "at least as fast"
    if min_speedup > 1:
        return f"at least {min_speedup:g}x faster"
    return f"at most {1 / min_speedup:.2f}x slower"
