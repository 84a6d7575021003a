"""evals.stats.load_curve: percentiles and intervals against independent references, the
speed-up, the crossover and the SLO-safe concurrency on constructed curves."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from evals.stats.load_curve import (
    check_levels,
    crossover,
    latency_summary,
    level_speedup,
    level_summary,
    request_tpot,
    slo_safe_concurrency,
)


def _hand_quantile(values, q):
    """Hyndman & Fan definition 7, written out: h = (n - 1) q, interpolate between the
    floor(h)-th and the next order statistic."""
    x = sorted(values)
    h = (len(x) - 1) * q
    lo = int(h)
    hi = min(lo + 1, len(x) - 1)
    return x[lo] + (h - lo) * (x[hi] - x[lo])


def test_percentiles_match_a_hand_computation():
    values = [0.30, 0.10, 0.20, 0.50, 0.40, 0.90, 0.70, 0.60, 0.80, 1.00, 2.50]
    s = latency_summary(values, np.random.default_rng(0), n_resamples=200)
    assert s.n == 11 and s.mean == pytest.approx(sum(values) / 11)
    assert s.p50.value == pytest.approx(0.6)  # the 6th of 11
    # p95: h = 10 * 0.95 = 9.5 -> halfway between 1.00 and 2.50
    assert s.p95.value == pytest.approx(1.75)
    assert s.p99.value == pytest.approx(_hand_quantile(values, 0.99))
    assert s.p99.value == pytest.approx(1.00 + 0.9 * 1.5)


def test_bootstrap_interval_equals_a_loop_over_the_same_draws():
    rng_values = np.random.default_rng(1)
    values = rng_values.lognormal(-3, 0.5, size=37)
    s = latency_summary(values, np.random.default_rng(7), confidence_level=0.9, n_resamples=300)
    draws = np.random.default_rng(7).integers(0, values.size, size=(300, values.size))
    p95s = [_hand_quantile(list(values[row]), 0.95) for row in draws]
    assert s.p95.low == pytest.approx(np.quantile(p95s, 0.05))
    assert s.p95.high == pytest.approx(np.quantile(p95s, 0.95))
    assert s.p95.low <= s.p95.value <= s.p95.high


def test_bootstrap_interval_agrees_with_scipy():
    values = np.random.default_rng(2).gamma(2.0, 0.05, size=400)
    ours = latency_summary(values, np.random.default_rng(3), n_resamples=4000)
    ref = sps.bootstrap((values,), lambda x, axis: np.quantile(x, 0.5, axis=axis),
                        method="percentile", n_resamples=4000, vectorized=True,
                        rng=np.random.default_rng(4)).confidence_interval
    width = ref.high - ref.low
    assert ours.p50.low == pytest.approx(ref.low, abs=0.15 * width)
    assert ours.p50.high == pytest.approx(ref.high, abs=0.15 * width)


def test_level_summary_from_timestamps():
    start = np.array([0.0, 0.0, 1.0, 1.2])
    first = np.array([0.1, 0.2, 1.1, 1.5])
    end = np.array([1.0, 1.1, 2.0, 3.0])
    tokens = np.array([10, 10, 1, 16])
    gaps = [0.1, 0.1, 0.05]
    s = level_summary(2, start, first, end, tokens, gaps, np.random.default_rng(0),
                      n_resamples=100)
    assert s.wall_seconds == pytest.approx(3.0)
    assert s.requests == 4 and s.output_tokens == 37
    assert s.requests_per_s == pytest.approx(4 / 3)
    assert s.output_tokens_per_s == pytest.approx(37 / 3)
    assert s.ttft.p50.value == pytest.approx(np.median([0.1, 0.2, 0.1, 0.3]))
    # one-token requests have no TPOT
    assert s.tpot.n == 3
    assert list(request_tpot(first, end, tokens)) == pytest.approx([0.1, 0.1, 0.1])
    assert s.e2e.p50.value == pytest.approx(np.median([1.0, 1.1, 1.0, 1.8]))
    assert s.itl.n == 3


def test_level_summary_refuses_time_running_backwards():
    with pytest.raises(ValueError, match="start <= first token <= end"):
        level_summary(1, [0.0], [0.5], [0.4], [3], [], np.random.default_rng(0))


def test_speedup_is_the_ratio_of_token_rates_with_an_interval():
    rng = np.random.default_rng(5)
    eb = rng.normal(2.0, 0.1, 50)
    ec = rng.normal(1.0, 0.05, 50)
    tokens = np.full(50, 32)
    s = level_speedup(4, eb, tokens, ec, tokens, np.random.default_rng(6), n_resamples=2000)
    assert s.speedup == pytest.approx(eb.sum() / ec.sum())
    assert s.low < s.speedup < s.high
    assert 1.8 < s.low and s.high < 2.2
    ref = sps.bootstrap((eb, ec), lambda b, c, axis: b.sum(axis) / c.sum(axis), paired=False,
                        method="percentile", n_resamples=4000, vectorized=True,
                        rng=np.random.default_rng(8)).confidence_interval
    assert s.low == pytest.approx(ref.low, abs=0.02) and s.high == pytest.approx(ref.high, abs=0.02)


def test_crossover_is_interpolated_between_levels():
    # faster at 1 and 4, slower at 16: 1.2 at 4 and 0.8 at 16 cross 1 halfway, at 10
    c = crossover([1, 4, 16, 32], [1.5, 1.2, 0.8, 0.7])
    assert c.kind == "crossed" and c.between == (4, 16)
    assert c.concurrency == pytest.approx(10.0)
    c = crossover([1, 2, 4], [1.3, 1.1, 0.9])
    assert c.concurrency == pytest.approx(3.0)


def test_no_crossover_in_the_range():
    assert crossover([1, 4, 16], [1.5, 1.3, 1.05]).kind == "faster_throughout"
    assert crossover([1, 4, 16], [0.9, 0.8, 0.7]).kind == "slower_throughout"
    assert crossover([1, 4, 16], [0.9, 1.1, 1.2]).kind == "not_faster_at_start"
    none = crossover([1, 4], [1.2, 1.1])
    assert none.concurrency is None and none.between is None


def test_crossover_takes_the_first_fall():
    c = crossover([1, 2, 4, 8], [1.4, 0.6, 1.2, 0.9])
    assert c.between == (1, 2) and c.concurrency == pytest.approx(1.5)


@pytest.mark.parametrize("levels", [[], [4, 4], [8, 4], [0, 1]])
def test_levels_must_rise(levels):
    with pytest.raises(ValueError):
        check_levels(levels)


def test_slo_safe_concurrency_is_the_highest_level_that_meets_it():
    levels = [1, 4, 16, 64]
    ttft = [0.05, 0.09, 0.14, 0.60]
    tpot = [0.010, 0.012, 0.030, 0.050]
    r = slo_safe_concurrency(levels, ttft, tpot, ttft_p95_target=0.150)
    assert r.safe_concurrency == 16 and r.meets == (True, True, True, False)
    r = slo_safe_concurrency(levels, ttft, tpot, ttft_p95_target=0.150, tpot_p95_target=0.020)
    assert r.safe_concurrency == 4
    r = slo_safe_concurrency(levels, ttft, tpot, ttft_p95_target=0.01)
    assert r.safe_concurrency is None


def test_slo_confident_level_uses_the_upper_ends():
    r = slo_safe_concurrency([1, 4, 16], [0.05, 0.10, 0.14], [0.01] * 3,
                             ttft_p95_target=0.150, ttft_p95_high=[0.07, 0.12, 0.19])
    assert r.safe_concurrency == 16 and r.confident_concurrency == 4


def test_a_failed_level_does_not_meet_the_slo():
    r = slo_safe_concurrency([1, 2, 4], [0.05, float("nan"), 0.06], [0.01, 0.01, 0.01],
                             ttft_p95_target=0.1)
    assert r.meets == (True, False, True) and r.safe_concurrency == 4


def test_slo_needs_a_target():
    with pytest.raises(ValueError, match="target"):
        slo_safe_concurrency([1], [0.1], [0.1])
