"""Holm and Benjamini-Hochberg against hand-computed values and statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from evals.stats import benjamini_hochberg, holm

PVALUES = [0.01, 0.04, 0.03, 0.005]


def test_holm_hand_computed():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max.
    result = holm(PVALUES, alpha=0.05)
    np.testing.assert_allclose(result.pvalues_adjusted, [0.03, 0.06, 0.06, 0.02], rtol=1e-12)
    np.testing.assert_array_equal(result.reject, [True, False, False, True])


def test_benjamini_hochberg_hand_computed():
    # sorted p * 4 / rank = 0.02, 0.02, 0.04, 0.04 -> running min from the top.
    result = benjamini_hochberg(PVALUES, alpha=0.05)
    np.testing.assert_allclose(result.pvalues_adjusted, [0.02, 0.04, 0.04, 0.02], rtol=1e-12)
    assert result.reject.all()


def naive_holm(p):
    p = np.asarray(p)
    order = np.argsort(p)
    m = p.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order]).clip(max=1)
    out = np.empty(m)
    out[order] = adjusted
    return out


def naive_bh(p):
    p = np.asarray(p)
    order = np.argsort(p)
    m = p.size
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1].clip(max=1)
    out = np.empty(m)
    out[order] = adjusted
    return out


@pytest.mark.parametrize("seed", range(3))
def test_random_pvalues_match_statsmodels_and_naive_formulas(seed):
    p = np.random.default_rng(seed).beta(0.5, 3, size=20)
    for ours, method, naive in (
        (holm(p), "holm", naive_holm),
        (benjamini_hochberg(p), "fdr_bh", naive_bh),
    ):
        reject, adjusted, _, _ = multipletests(p, alpha=0.05, method=method)
        np.testing.assert_allclose(ours.pvalues_adjusted, adjusted, rtol=1e-9)
        np.testing.assert_allclose(ours.pvalues_adjusted, naive(p), rtol=1e-9)
        np.testing.assert_array_equal(ours.reject, reject)


def test_invalid_pvalues():
    with pytest.raises(ValueError, match=r"\[0, 1\].*index 1"):
        holm([0.1, 1.2])
    with pytest.raises(ValueError, match="index 0"):
        benjamini_hochberg([np.nan])
    with pytest.raises(ValueError, match="empty"):
        holm([])
    with pytest.raises(ValueError, match="alpha"):
        holm([0.1], alpha=0)
