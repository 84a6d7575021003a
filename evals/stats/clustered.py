"""Paired tests for clustered items: several questions about one passage, or items that a
serving fault flips together (a corrupted shared prefix).

The exact McNemar test assumes items flip independently; when they flip in clusters its
false-alarm rate grows with the cluster size. This test works on the mean paired
difference D with the cluster-robust (Liang-Zeger) standard error of Miller (2024, sec.
2.2; evals.stats.standard_error) with the G/(G-1) small-sample factor, and refers
D / SE and (D + margin) / SE to Student's t with G - 1 degrees of freedom (the usual
reference for a cluster-robust test with G clusters: Cameron & Miller 2015, J Human
Resources 50:317-372, sec. VI). Its interval is D +- t_{1-alpha}(G-1) SE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scipy import stats

from .intervals import ConfidenceInterval, DEFAULT_CONFIDENCE_LEVEL
from .standard_error import clustered_standard_error
from .validation import check_alpha, check_margin


@dataclass(frozen=True, slots=True)
class ClusteredPairedResult:
    mean_difference: float
    standard_error: float
    """Cluster-robust, with the G/(G-1) factor."""
    n_clusters: int
    design_effect: float
    """(clustered SE / i.i.d. SE)^2: how much the clustering inflates the variance."""
    pvalue_regression: float
    """One-sided: the mean difference is below 0."""
    pvalue_noninferiority: float
    """One-sided: the mean difference is above -margin."""
    margin: float

    def confidence_interval(self, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL) -> ConfidenceInterval:
        half = 0.0
        if self.standard_error > 0:
            half = float(stats.t.ppf(0.5 + confidence_level / 2, self.n_clusters - 1)) * \
                self.standard_error
        return ConfidenceInterval(self.mean_difference - half, self.mean_difference + half)


def clustered_paired_test(differences: Any, clusters: Any, margin: float,
                          alpha: float = 0.05) -> ClusteredPairedResult:
    """Cluster-robust t-tests of a drop and of non-inferiority at `margin` on per-item
    paired differences (candidate - baseline), one cluster label per item."""
    margin, alpha = check_margin(margin), check_alpha(alpha)
    se = clustered_standard_error(differences, clusters, small_sample_correction=True)
    g = se.n_clusters
    if se.standard_error == 0:
        p_reg = 1.0 if se.mean >= 0 else 0.0
        p_ni = 0.0 if se.mean > -margin else 1.0
    else:
        p_reg = float(stats.t.cdf(se.mean / se.standard_error, g - 1))
        p_ni = float(stats.t.sf((se.mean + margin) / se.standard_error, g - 1))
    return ClusteredPairedResult(
        mean_difference=se.mean, standard_error=se.standard_error, n_clusters=g,
        # compare like with like: the i.i.d. SE has no small-sample factor
        design_effect=se.design_effect * (g - 1) / g, pvalue_regression=p_reg,
        pvalue_noninferiority=p_ni, margin=margin)
