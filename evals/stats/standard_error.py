"""Cluster-robust standard error of a mean paired difference.

Miller, E. (2024). Adding Error Bars to Evals: A Statistical Approach to Language
Model Evaluations. arXiv:2411.00640, sec. 2.2 ("Clustered standard errors").
When questions share a passage or subject their scores are correlated and the
i.i.d. (CLT) standard error is too small. Miller's clustered standard error is

    SE_clustered^2 = SE_CLT^2 + (1/n^2) * sum_c sum_i sum_{j != i} (s_ic - s)(s_jc - s)
                   = (1/n^2) * sum_c (sum_i (s_ic - s))^2,

taking SE_CLT^2 = (1/n^2) * sum (s_i - s)^2. This is the Liang-Zeger (1986) sandwich
estimator for an intercept-only regression, which statsmodels computes with
``cov_type='cluster'``; ``small_sample_correction=True`` applies its default
G / (G - 1) factor for G clusters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .intervals import ConfidenceInterval, DEFAULT_CONFIDENCE_LEVEL
from .validation import as_labels, as_score_array, check_confidence_level


@dataclass(frozen=True, slots=True)
class ClusteredStandardError:
    """Mean of per-item differences with i.i.d. and cluster-robust standard errors."""

    mean: float
    """Mean of the per-item differences (candidate - baseline)."""
    standard_error: float
    """Cluster-robust standard error of the mean (Miller 2024)."""
    iid_standard_error: float
    """Standard error ignoring clusters, sqrt(sum (s_i - s)^2) / n."""
    n_items: int
    n_clusters: int
    small_sample_correction: bool

    @property
    def design_effect(self) -> float:
        """Variance inflation from clustering, (SE_clustered / SE_iid)^2; 1.0 if both are 0."""
        if self.iid_standard_error == 0.0:
            return 1.0
        return (self.standard_error / self.iid_standard_error) ** 2

    def confidence_interval(self, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL) -> ConfidenceInterval:
        """Normal-approximation interval mean +- z * SE, as recommended by Miller (2024)."""
        level = check_confidence_level(confidence_level)
        half = float(stats.norm.ppf(0.5 + level / 2.0)) * self.standard_error
        return ConfidenceInterval(self.mean - half, self.mean + half)


def clustered_standard_error(
    differences: Any, clusters: Any, *, small_sample_correction: bool = False
) -> ClusteredStandardError:
    """Cluster-robust standard error of mean(differences) (Miller 2024, sec. 2.2).

    ``differences`` are per-item scores or paired differences (candidate - baseline);
    ``clusters`` gives one cluster label per item. With every item in its own cluster the
    result equals the i.i.d. standard error.
    """
    values = as_score_array(differences, "differences")
    labels = as_labels(clusters, values.size, "clusters")
    n = values.size
    mean = float(values.mean())
    residuals = values - mean
    _, index = np.unique(labels, return_inverse=True)
    cluster_sums = np.bincount(index.ravel(), weights=residuals)
    n_clusters = int(cluster_sums.size)
    variance = float(cluster_sums @ cluster_sums) / n**2
    if small_sample_correction:
        if n_clusters < 2:
            raise ValueError(
                "small_sample_correction needs at least two clusters; all items are in one cluster."
            )
        variance *= n_clusters / (n_clusters - 1)
    return ClusteredStandardError(
        mean=mean,
        standard_error=math.sqrt(variance),
        iid_standard_error=math.sqrt(float(residuals @ residuals)) / n,
        n_items=int(n),
        n_clusters=n_clusters,
        small_sample_correction=bool(small_sample_correction),
    )
