"""A clustered 0/1 task (`cluster:`) is never more certain than its items unclustered: the
cluster-robust t-tests count together with the exact McNemar and Tango tests, the larger
p-value of each pair and the hull of the two intervals (evals.analyse.task_analysis)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from evals.analyse.task_analysis import analyse_task
from evals.decide.verdict import Verdict, decide
from evals.pair.pairing import PairedTask

ALPHA, MARGIN = 0.05, 0.03


def paired(baseline, candidate) -> PairedTask:
    b, c = np.asarray(baseline, float), np.asarray(candidate, float)
    return PairedTask(task="conv", metric="acc", filter="none", doc_ids=tuple(range(len(b))),
                      baseline=b, candidate=c, baseline_records=(), candidate_records=())


def analyse(p: PairedTask, clusters=None):
    return analyse_task(p, gated=True, alpha=ALPHA, margin=MARGIN, seed=1, n_resamples=200,
                        clusters=clusters)


def verdict(analysis) -> Verdict:
    return decide([analysis], alpha=ALPHA, margin=MARGIN).verdict


@pytest.fixture(autouse=True)
def no_records(monkeypatch):
    # these PairedTasks carry no sample records: skip the label and length analyses
    monkeypatch.setattr("evals.analyse.task_analysis._labels", lambda p: None)
    monkeypatch.setattr("evals.analyse.task_analysis._lengths", lambda p: None)


def test_no_flips_in_clusters_is_as_uncertain_as_the_items_unclustered():
    """64 items in 32 conversations, no item changed: the cluster-robust SE is 0, which
    alone gave the interval [0, 0] and a PASS. Rule of three: 0 flips of 64 is consistent
    with a 4.7% flip rate, so a 3-pt margin cannot be shown."""
    b = np.tile([1.0, 0.0, 1.0, 1.0], 16)
    clusters = np.repeat(np.arange(32), 2)
    clustered, plain = analyse(paired(b, b), clusters), analyse(paired(b, b))
    # closed form of Tango's test with no discordant pairs: the restricted estimate of
    # P(correct -> wrong) at delta0 = -d is d, so Z = sqrt(n d / (1 - d)); the interval
    # ends solve Z = z_{1-alpha}: d = z^2 / (n + z^2)
    n, z = 64, sps.norm.isf(ALPHA)
    half = z * z / (n + z * z)
    assert (clustered.ci_low, clustered.ci_high) == pytest.approx((-half, half), rel=1e-9)
    p_ni = sps.norm.sf(np.sqrt(n * MARGIN / (1 - MARGIN)))
    assert clustered.noninferiority_pvalue == pytest.approx(p_ni, rel=1e-9)
    assert p_ni > ALPHA  # about 0.08
    assert (clustered.ci_low, clustered.ci_high, clustered.noninferiority_pvalue) == \
        (plain.ci_low, plain.ci_high, plain.noninferiority_pvalue)
    assert clustered.regression_pvalue == 1.0 and clustered.mde is None
    assert clustered.clusters == 32
    assert verdict(clustered) is Verdict.INCONCLUSIVE and verdict(plain) is Verdict.INCONCLUSIVE


def test_whole_clusters_flipping_keep_the_cluster_robust_test():
    """200 items in 50 clusters of 4; 5 clusters flip down and 2 up, every item of each:
    exact McNemar (20 vs 8 flips) alone says REGRESSION, but the flips are 7 events, and
    the cluster-robust p-value, the larger, counts."""
    b = np.r_[np.ones(160), np.zeros(40)]
    c = b.copy()
    c[:20], c[160:168] = 0, 1
    clusters = np.repeat(np.arange(50), 4)
    clustered, plain = analyse(paired(b, c), clusters), analyse(paired(b, c))
    # equal cluster sizes: the cluster-robust t-test with the G/(G-1) factor is the
    # one-sample t-test on the 50 cluster means, with 49 degrees of freedom
    means = (c - b).reshape(50, 4).mean(axis=1)
    robust_p = sps.ttest_1samp(means, 0.0, alternative="less").pvalue
    mcnemar_p = sps.binomtest(20, 28, 0.5, alternative="greater").pvalue
    assert plain.regression_pvalue == pytest.approx(mcnemar_p, rel=1e-9) and mcnemar_p < ALPHA
    assert clustered.regression_pvalue == pytest.approx(robust_p, rel=1e-9)
    assert robust_p > ALPHA > mcnemar_p
    # the interval is the cluster-robust t interval, which contains Tango's
    half = sps.t.isf(ALPHA, 49) * means.std(ddof=1) / np.sqrt(50)
    assert (clustered.ci_low, clustered.ci_high) == \
        pytest.approx((means.mean() - half, means.mean() + half), rel=1e-9)
    assert clustered.ci_low < plain.ci_low and clustered.ci_high > plain.ci_high
    # non-inferiority: Tango's p-value is the larger here
    robust_ni = sps.ttest_1samp(means, -MARGIN, alternative="greater").pvalue
    assert clustered.noninferiority_pvalue == pytest.approx(plain.noninferiority_pvalue,
                                                            rel=1e-12)
    assert clustered.noninferiority_pvalue > robust_ni
    assert verdict(plain) is Verdict.REGRESSION
    assert verdict(clustered) is Verdict.INCONCLUSIVE
    assert clustered.regression_test.startswith("cluster-robust t-test and exact McNemar")


def test_one_flip_gets_the_exact_interval_not_the_narrower_cluster_robust_one():
    """One correct -> wrong of 64 items in 32 clusters: the cluster-robust t interval is
    [-4.2, +1.1] pts, narrower than Tango's; the exact tests' p-values are the larger."""
    b = np.tile([1.0, 0.0, 1.0, 1.0], 16)
    c = b.copy()
    c[0] = 0
    clusters = np.repeat(np.arange(32), 2)
    clustered, plain = analyse(paired(b, c), clusters), analyse(paired(b, c))
    means = (c - b).reshape(32, 2).mean(axis=1)
    half = sps.t.isf(ALPHA, 31) * means.std(ddof=1) / np.sqrt(32)
    assert (means.mean() - half, means.mean() + half) == \
        pytest.approx((-0.0421, 0.0109), abs=1e-4)
    assert (clustered.ci_low, clustered.ci_high) == (plain.ci_low, plain.ci_high)
    assert clustered.ci_low < means.mean() - half and clustered.ci_high > means.mean() + half
    assert clustered.regression_pvalue == pytest.approx(0.5, rel=1e-12)  # 1 of 1 flip down
    assert clustered.noninferiority_pvalue == plain.noninferiority_pvalue
    assert clustered.noninferiority_pvalue > \
        sps.ttest_1samp(means, -MARGIN, alternative="greater").pvalue
    assert clustered.mde is None and "no drop is detectable" in clustered.mde_note
