"""Paired (cluster) bootstrap: agreement with scipy, coverage, memory bounds."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy import stats

from evals.stats import paired_bootstrap


def _scipy_percentile(baseline, candidate, n_resamples, seed):
    result = stats.bootstrap(
        (baseline, candidate),
        lambda b, c, axis: c.mean(axis=axis) - b.mean(axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=n_resamples,
        random_state=np.random.default_rng(seed),
    )
    return result


def test_binary_data_agrees_with_scipy_within_monte_carlo_error():
    rng = np.random.default_rng(1)
    n = 400
    baseline = (rng.random(n) < 0.7).astype(float)
    candidate = np.where(rng.random(n) < 0.12, 1 - baseline, baseline)
    ours = paired_bootstrap(baseline, candidate, rng=np.random.default_rng(2))
    ref = _scipy_percentile(baseline, candidate, 10_000, 3)
    # Resampled means are multiples of 1/400, so quantiles can differ by one step
    # plus Monte Carlo error (about 0.0005 here).
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.0025 + 0.002)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.0025 + 0.002)
    assert ours.standard_error == pytest.approx(ref.standard_error, rel=0.05)
    assert ours.statistic == pytest.approx(candidate.mean() - baseline.mean(), rel=1e-12)


def test_continuous_data_agrees_with_scipy_within_monte_carlo_error():
    rng = np.random.default_rng(4)
    n = 300
    baseline = rng.beta(2, 3, n)
    candidate = np.clip(baseline + rng.normal(-0.02, 0.1, n), 0, 1)
    ours = paired_bootstrap(baseline, candidate, rng=np.random.default_rng(5), n_resamples=5000)
    ref = _scipy_percentile(baseline, candidate, 5000, 6)
    se = ref.standard_error
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.15 * se)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.15 * se)
    assert ours.standard_error == pytest.approx(se, rel=0.06)


def test_percentile_interval_coverage():
    """Over 400 simulated comparisons the 95% interval covers the true delta at the
    nominal rate (within 3 Monte Carlo standard errors)."""
    rng = np.random.default_rng(8)
    reps, n, p_loss, p_gain = 400, 300, 0.08, 0.05
    true_delta = p_gain - p_loss
    covered = 0
    for _ in range(reps):
        u = rng.random(n)
        d = np.where(u < p_loss, -1.0, np.where(u < p_loss + p_gain, 1.0, 0.0))
        result = paired_bootstrap(np.zeros(n), d, rng=rng, n_resamples=2000)
        covered += result.low <= true_delta <= result.high
    rate = covered / reps
    assert abs(rate - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / reps)


def test_cluster_bootstrap_restores_coverage_when_items_are_correlated():
    """Items in 60 clusters share a cluster-level flip tendency: resampling items
    undercovers, resampling clusters does not."""
    rng = np.random.default_rng(3)
    reps, n_clusters, size = 300, 60, 10
    cluster = np.repeat(np.arange(n_clusters), size)
    covered = {"clustered": 0, "items": 0}
    for _ in range(reps):
        shift = rng.normal(0, 0.12, n_clusters)
        p_up = np.clip(0.15 + shift[cluster], 0, 0.3)  # symmetric: true delta is 0
        u = rng.random(cluster.size)
        d = np.where(u < p_up, 1.0, np.where(u < 0.3, -1.0, 0.0))
        zeros = np.zeros_like(d)
        clustered = paired_bootstrap(zeros, d, rng=rng, n_resamples=1000, clusters=cluster)
        items = paired_bootstrap(zeros, d, rng=rng, n_resamples=1000)
        assert clustered.n_clusters == n_clusters and items.n_clusters == cluster.size
        covered["clustered"] += clustered.low <= 0.0 <= clustered.high
        covered["items"] += items.low <= 0.0 <= items.high
    tolerance = 3 * np.sqrt(0.95 * 0.05 / reps)
    assert covered["clustered"] / reps >= 0.95 - tolerance
    assert covered["items"] / reps < 0.95 - tolerance


def test_singleton_clusters_reproduce_the_item_bootstrap_exactly():
    rng = np.random.default_rng(9)
    baseline = (rng.random(500) < 0.6).astype(float)
    candidate = (rng.random(500) < 0.6).astype(float)
    plain = paired_bootstrap(baseline, candidate, rng=np.random.default_rng(10))
    singletons = paired_bootstrap(
        baseline, candidate, rng=np.random.default_rng(10), clusters=[f"q{i}" for i in range(500)]
    )
    np.testing.assert_array_equal(plain.bootstrap_distribution, singletons.bootstrap_distribution)


def test_same_seed_same_result_and_other_levels():
    rng_data = np.random.default_rng(12)
    baseline, candidate = rng_data.random(200), rng_data.random(200)
    first = paired_bootstrap(baseline, candidate, rng=np.random.default_rng(1), n_resamples=3000)
    second = paired_bootstrap(baseline, candidate, rng=np.random.default_rng(1), n_resamples=3000)
    assert (first.low, first.high) == (second.low, second.high)
    assert first.confidence_interval() == (first.low, first.high)
    narrow = first.confidence_interval(0.8)
    assert first.low < narrow.low < narrow.high < first.high
    assert narrow.low == pytest.approx(np.quantile(first.bootstrap_distribution, 0.1), rel=1e-12)
    assert not first.bootstrap_distribution.flags.writeable


def test_million_binary_items_are_fast_and_memory_bounded():
    rng = np.random.default_rng(13)
    n = 1_000_000
    baseline = (rng.random(n) < 0.7).astype(float)
    candidate = np.where(rng.random(n) < 0.05, 1 - baseline, baseline)
    tracemalloc.start()
    try:
        result = paired_bootstrap(baseline, candidate, rng=rng, n_resamples=10_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 150e6  # a naive index bootstrap would need 80 GB
    delta = candidate.mean() - baseline.mean()
    se = np.sqrt(np.mean((candidate - baseline) ** 2) - delta**2) / np.sqrt(n)
    assert result.standard_error == pytest.approx(se, rel=0.05)


def test_continuous_resampling_works_in_bounded_chunks():
    rng = np.random.default_rng(14)
    x = rng.normal(size=20_000)
    tracemalloc.start()
    try:
        result = paired_bootstrap(x, x + rng.normal(size=x.size), rng=rng, n_resamples=500)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40e6  # 500 x 20,000 indices at once would be 80 MB
    assert result.standard_error == pytest.approx(1 / np.sqrt(x.size), rel=0.15)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rng": 42}, "numpy.random.Generator"),
        ({"rng": np.random.default_rng(0), "n_resamples": 1}, "n_resamples"),
        ({"rng": np.random.default_rng(0), "confidence_level": 1.0}, "confidence_level"),
        ({"rng": np.random.default_rng(0), "clusters": [1, 2]}, "one label per item"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        paired_bootstrap([0, 1, 1], [1, 1, 0], **kwargs)


def test_nan_and_single_item():
    with pytest.raises(ValueError, match="index 1"):
        paired_bootstrap([0, np.nan], [1, 1], rng=np.random.default_rng(0))
    single = paired_bootstrap([0.0], [1.0], rng=np.random.default_rng(0), n_resamples=10)
    assert (single.statistic, single.low, single.high, single.standard_error) == (
        1.0,
        1.0,
        1.0,
        0.0,
    )
