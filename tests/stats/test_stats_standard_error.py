"""Cluster-robust standard error against statsmodels' sandwich estimator."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from evals.stats import clustered_standard_error


def _statsmodels_se(values, groups, use_correction):
    fit = sm.OLS(values, np.ones(values.size)).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": use_correction}
    )
    return float(fit.bse[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("correction", [False, True])
def test_matches_statsmodels_cluster_covariance(seed, correction):
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 37, size=800)
    effects = rng.normal(0, 0.3, 37)
    values = np.clip(np.round(effects[groups] + rng.normal(0, 0.6, 800)), -1, 1)
    result = clustered_standard_error(values, groups, small_sample_correction=correction)
    assert result.standard_error == pytest.approx(
        _statsmodels_se(values, groups, correction), rel=1e-9
    )
    assert result.n_clusters == np.unique(groups).size and result.n_items == 800


def test_miller_double_sum_form():
    """Miller (2024): SE^2 = SE_CLT^2 + (1/n^2) sum_c sum_i sum_{j != i} e_ic e_jc."""
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(12), rng.integers(1, 6, 12))
    values = rng.normal(size=groups.size)
    e = values - values.mean()
    n = values.size
    cross = sum(
        e[i] * e[j] for i in range(n) for j in range(n) if i != j and groups[i] == groups[j]
    )
    expected = np.sqrt(np.sum(e**2) / n**2 + cross / n**2)
    assert clustered_standard_error(values, groups).standard_error == pytest.approx(
        expected, rel=1e-9
    )


def test_singleton_clusters_give_the_iid_standard_error():
    values = np.random.default_rng(6).normal(size=50)
    result = clustered_standard_error(values, np.arange(50))
    assert result.standard_error == pytest.approx(result.iid_standard_error, rel=1e-12)
    assert result.design_effect == pytest.approx(1.0, rel=1e-12)
    assert result.iid_standard_error == pytest.approx(np.std(values) / np.sqrt(50), rel=1e-12)


def test_confidence_interval_and_design_effect():
    values = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    result = clustered_standard_error(values, ["a", "a", "b", "b", "c", "c"])
    z = stats.norm.ppf(0.975)
    assert result.confidence_interval() == pytest.approx(
        (0.5 - z * result.standard_error, 0.5 + z * result.standard_error), rel=1e-12
    )
    assert result.design_effect > 1.0


def test_degenerate_inputs():
    constant = clustered_standard_error([1.0, 1.0, 1.0], [0, 0, 1])
    assert (constant.standard_error, constant.design_effect) == (0.0, 1.0)
    with pytest.raises(ValueError, match="at least two clusters"):
        clustered_standard_error([1.0, 0.0], [0, 0], small_sample_correction=True)
    with pytest.raises(ValueError, match="one label per item"):
        clustered_standard_error([1.0, 0.0], [0])
    with pytest.raises(ValueError, match="index 1"):
        clustered_standard_error([1.0, np.nan], [0, 1])
    with pytest.raises(ValueError, match="missing label"):
        clustered_standard_error([1.0, 0.0], ["a", None])
