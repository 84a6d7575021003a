"""Paired bootstrap of the accuracy difference, optionally resampling whole clusters.

The percentile bootstrap (Efron & Tibshirani 1993, *An Introduction to the
Bootstrap*, ch. 13) of mean(candidate - baseline). Items are resampled as pairs,
so the pairing is kept. With ``clusters`` the resampling unit is a cluster of items
that share a passage or subject (the cluster bootstrap, Davison & Hinkley 1997,
*Bootstrap Methods and their Application*, sec. 3.8), and the statistic of a
resample is the mean difference over all items drawn.

Memory and time stay bounded because the resampled statistic depends only on how
often each *distinct* unit is drawn. Units with the same (sum of differences,
number of items) are pooled, and each resample draws multinomial counts over the
distinct units. For 0/1 metrics the item differences take only the values -1, 0, 1,
so a resample of a million items costs three multinomial draws. Otherwise indices
are drawn in chunks of bounded size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .intervals import ConfidenceInterval, DEFAULT_CONFIDENCE_LEVEL
from .validation import (
    as_labels,
    as_paired_arrays,
    check_confidence_level,
    check_generator,
    check_positive_int,
)

# Above this many distinct units, index resampling is cheaper than multinomial draws.
_MAX_MULTINOMIAL_UNITS = 256
# Upper bound on the number of entries in one chunk of resampled indices or counts.
_CHUNK_ENTRIES = 1 << 20


@dataclass(frozen=True, slots=True, eq=False)
class BootstrapResult:
    """Percentile bootstrap of the mean paired difference (candidate - baseline)."""

    statistic: float
    """Observed mean difference, candidate minus baseline."""
    standard_error: float
    """Standard deviation of the bootstrap distribution."""
    low: float
    """Lower percentile limit at ``confidence_level``."""
    high: float
    """Upper percentile limit at ``confidence_level``."""
    confidence_level: float
    n_resamples: int
    n_items: int
    n_clusters: int
    """Number of resampling units (clusters, or items when unclustered)."""
    bootstrap_distribution: np.ndarray = field(repr=False)
    """The resampled mean differences (read-only), for other interval levels."""

    def confidence_interval(self, confidence_level: float | None = None) -> ConfidenceInterval:
        """Percentile interval; defaults to the level the bootstrap was run with."""
        if confidence_level is None:
            return ConfidenceInterval(self.low, self.high)
        low, high = _percentile_interval(
            self.bootstrap_distribution, check_confidence_level(confidence_level)
        )
        return ConfidenceInterval(low, high)


def _percentile_interval(distribution: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(distribution, [tail, 1.0 - tail])
    return float(low), float(high)


def _unit_totals(
    differences: np.ndarray, clusters: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per resampling unit: the sum of item differences and the number of items."""
    if clusters is None:
        return differences, np.ones_like(differences)
    _, cluster_index = np.unique(clusters, return_inverse=True)
    cluster_index = cluster_index.ravel()
    sums = np.bincount(cluster_index, weights=differences)
    sizes = np.bincount(cluster_index).astype(np.float64)
    return sums, sizes


def _resample_means(
    sums: np.ndarray, sizes: np.ndarray, n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap distribution of sum(sums[draw]) / sum(sizes[draw]) over unit draws."""
    n_units = sums.size
    # Pool identical units; a complex key sorts by (sum, size) in one 1-D pass.
    keys, multiplicity = np.unique(sums + 1j * sizes, return_counts=True)
    units = np.column_stack([keys.real, keys.imag])
    out = np.empty(n_resamples)
    if units.shape[0] <= _MAX_MULTINOMIAL_UNITS:
        # Drawing n_units units with replacement == multinomial counts over distinct units.
        pvals = multiplicity / n_units
        chunk = max(1, _CHUNK_ENTRIES // units.shape[0])
        for start in range(0, n_resamples, chunk):
            stop = min(n_resamples, start + chunk)
            counts = rng.multinomial(n_units, pvals, size=stop - start).astype(np.float64)
            out[start:stop] = (counts @ units[:, 0]) / (counts @ units[:, 1])
        return out
    unit_sizes = bool(np.all(sizes == 1.0))
    chunk = max(1, _CHUNK_ENTRIES // n_units)
    for start in range(0, n_resamples, chunk):
        stop = min(n_resamples, start + chunk)
        index = rng.integers(0, n_units, size=(stop - start, n_units))
        total = sums[index].sum(axis=1)
        out[start:stop] = total / n_units if unit_sizes else total / sizes[index].sum(axis=1)
    return out


def paired_bootstrap(
    baseline: Any,
    candidate: Any,
    *,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
    clusters: Any = None,
) -> BootstrapResult:
    """Percentile bootstrap interval for mean(candidate) - mean(baseline).

    ``clusters`` (optional) gives one cluster label per item; whole clusters are then
    resampled, which widens the interval when items within a cluster are correlated.
    Randomness comes only from ``rng``. Cost is O(n_resamples * distinct units) for
    metrics with few distinct differences (0/1 accuracy) and O(n_resamples * n_units)
    in chunks of about a million entries otherwise.
    """
    base, cand = as_paired_arrays(baseline, candidate)
    rng = check_generator(rng)
    n_resamples = check_positive_int(n_resamples, "n_resamples", minimum=2)
    level = check_confidence_level(confidence_level)
    differences = cand - base
    labels = None if clusters is None else as_labels(clusters, differences.size, "clusters")
    sums, sizes = _unit_totals(differences, labels)
    distribution = _resample_means(sums, sizes, n_resamples, rng)
    distribution.setflags(write=False)
    low, high = _percentile_interval(distribution, level)
    return BootstrapResult(
        statistic=float(differences.mean()),
        standard_error=float(distribution.std(ddof=1)),
        low=low,
        high=high,
        confidence_level=level,
        n_resamples=n_resamples,
        n_items=int(differences.size),
        n_clusters=int(sums.size),
        bootstrap_distribution=distribution,
    )
