"""Cluster-robust paired tests: calibrated under a clustered null where the exact McNemar
test is not, and equal to a one-sample t-test when every item is its own cluster."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from evals.stats import clustered_paired_test


def _clustered_null(rng, passages=300, questions=4, passage_flip=0.03, item_flip=0.02):
    """300 passages x 4 questions; 3% of passages flip together (all their items move the
    same way, up or down at random), and items also flip alone: no change on average."""
    d = np.zeros(passages * questions)
    event = np.repeat(rng.random(passages) < passage_flip, questions)
    sign = np.repeat(np.where(rng.random(passages) < 0.5, -1.0, 1.0), questions)
    d[event] = sign[event]
    alone = (rng.random(d.size) < item_flip) & ~event
    d[alone] = np.where(rng.random(int(alone.sum())) < 0.5, -1.0, 1.0)
    return d, np.repeat(np.arange(passages), questions)


def test_clustered_null_false_alarms_near_alpha_where_mcnemar_inflates():
    rng = np.random.default_rng(12)
    sims, alpha = 2000, 0.05
    clustered = mcnemar = 0
    for _ in range(sims):
        d, clusters = _clustered_null(rng)
        clustered += clustered_paired_test(d, clusters, 0.03, alpha).pvalue_regression < alpha
        b, c = int((d < 0).sum()), int((d > 0).sum())
        mcnemar += (b + c) > 0 and sps.binom.sf(b - 1, b + c, 0.5) < alpha
    se = np.sqrt(alpha * (1 - alpha) / sims)
    assert abs(clustered / sims - alpha) < 3 * se, clustered / sims
    assert mcnemar / sims > 0.10  # the unclustered test raises false alarms
    print(f"\nclustered null (300 x 4, 3% of passages flip together), {sims} runs: "
          f"cluster-robust {clustered / sims:.3f}, exact McNemar {mcnemar / sims:.3f}")


def test_singleton_clusters_are_a_one_sample_t_test():
    rng = np.random.default_rng(3)
    d = rng.choice([-1.0, 0.0, 1.0], size=500, p=[0.05, 0.9, 0.05])
    result = clustered_paired_test(d, np.arange(d.size), 0.02)
    reference = sps.ttest_1samp(d, 0.0, alternative="less")
    assert result.pvalue_regression == pytest.approx(reference.pvalue, rel=1e-9)
    ni = sps.ttest_1samp(d, -0.02, alternative="greater")
    assert result.pvalue_noninferiority == pytest.approx(ni.pvalue, rel=1e-9)
    low, high = result.confidence_interval(0.9)
    t = sps.t.ppf(0.95, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    assert (low, high) == pytest.approx((d.mean() - t, d.mean() + t), rel=1e-9)
    assert result.design_effect == pytest.approx(1.0, rel=1e-9)


def test_no_change_is_not_a_drop():
    result = clustered_paired_test(np.zeros(40), np.repeat(np.arange(10), 4), 0.02)
    assert result.pvalue_regression == 1.0 and result.pvalue_noninferiority == 0.0
