"""The interaction contrast of a 2x2 over paired items: the exact sign-flip p-value against
scipy's permutation test (exact enumeration for small n, and a large Monte Carlo for large
n) and against brute-force enumeration; the interval against scipy's one-sample t test."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from evals.stats import interaction_test


def _arms(rng: np.random.Generator, n: int, p: float = 0.7, drop_both: float = 0.0):
    """Four arms: each alone flips a few items either way at random; `drop_both` of the
    items correct otherwise fail only when both optimizations are on."""
    y00 = (rng.random(n) < p).astype(int)
    y10 = np.where(rng.random(n) < 0.05, 1 - y00, y00)
    y01 = np.where(rng.random(n) < 0.05, 1 - y00, y00)
    y11 = y10 + y01 - y00  # additive: no interaction on average ...
    y11 = np.clip(y11, 0, 1)
    hit = (rng.random(n) < drop_both) & (y11 == 1)
    y11[hit] = 0  # ... except the items the combination breaks
    return y00, y10, y01, y11


def _contrast(y00, y10, y01, y11):
    return np.asarray(y11) - np.asarray(y10) - np.asarray(y01) + np.asarray(y00)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
def test_pvalue_equals_scipys_exact_sign_flip_enumeration(seed, alternative):
    rng = np.random.default_rng(seed)
    arms = _arms(rng, 60, drop_both=0.1)
    c = _contrast(*arms)
    nonzero = c[c != 0]
    assert 0 < nonzero.size <= 16  # scipy enumerates all 2^k sign patterns exactly
    reference = sps.permutation_test((nonzero,), np.sum, permutation_type="samples",
                                     alternative=alternative, n_resamples=np.inf)
    result = interaction_test(*arms, alternative=alternative)
    assert result.pvalue == pytest.approx(reference.pvalue, rel=1e-12, abs=1e-15)
    assert result.statistic == pytest.approx(c.mean())


def test_pvalue_equals_brute_force_enumeration_with_twos():
    c = np.array([-2, -2, -1, -1, -1, 1, 2, 0, 0, -2])
    # one (y00, y10, y01, y11) cell per contrast value
    cells = {-2: (0, 1, 1, 0), -1: (0, 1, 0, 0), 0: (1, 1, 1, 1), 1: (0, 0, 0, 1),
             2: (1, 0, 0, 1)}
    y00, y10, y01, y11 = (np.array([cells[int(v)][k] for v in c]) for k in range(4))
    assert list(_contrast(y00, y10, y01, y11)) == list(c)
    magnitudes = np.abs(c[c != 0])
    sums = [np.dot(signs, magnitudes)
            for signs in itertools.product((-1, 1), repeat=magnitudes.size)]
    for alternative, expected in (("less", np.mean(np.array(sums) <= c.sum())),
                                  ("greater", np.mean(np.array(sums) >= c.sum()))):
        result = interaction_test(y00, y10, y01, y11, alternative=alternative)
        assert result.pvalue == pytest.approx(expected, rel=1e-12)
    assert (result.n_one, result.n_two, result.sum_contrast) == (4, 4, -6)


def test_large_n_matches_a_monte_carlo_sign_flip_and_catches_a_combined_drop():
    rng = np.random.default_rng(11)
    arms = _arms(rng, 4000, drop_both=0.03)
    result = interaction_test(*arms)
    c = _contrast(*arms)
    reference = sps.permutation_test((c[c != 0],), np.sum, permutation_type="samples",
                                     alternative="less", n_resamples=20_000,
                                     random_state=np.random.default_rng(3))
    # the Monte Carlo p-value estimates the exact one; with p this small, both are tiny
    assert result.pvalue < 1e-3 and reference.pvalue < 1e-3
    assert result.statistic < 0 and result.confidence_interval().high < 0


def test_no_interaction_is_not_significant_and_rejections_are_at_level():
    rng = np.random.default_rng(5)
    pvalues = [interaction_test(*_arms(rng, 800), alternative="two-sided").pvalue
               for _ in range(300)]
    # exact test: the rejection rate at 5% is at most 5% (plus Monte Carlo slack)
    assert np.mean(np.array(pvalues) <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 300)


def test_interval_is_scipys_one_sample_t_interval():
    arms = _arms(np.random.default_rng(2), 500, drop_both=0.05)
    c = _contrast(*arms)
    reference = sps.ttest_1samp(c, 0.0).confidence_interval(confidence_level=0.9)
    result = interaction_test(*arms, confidence_level=0.9)
    assert result.confidence_interval().low == pytest.approx(reference.low, rel=1e-12)
    assert result.confidence_interval().high == pytest.approx(reference.high, rel=1e-12)


def test_additive_effects_give_no_contrast_and_bad_input_is_named():
    y = np.array([1, 0, 1, 1, 0])
    result = interaction_test(y, y, y, y)
    assert result.pvalue == 1.0 and result.note and result.statistic == 0.0
    with pytest.raises(ValueError, match="same items; they have 5, 5, 5, 4 items"):
        interaction_test(y, y, y, y[:4])
    with pytest.raises(ValueError, match="y11 must be binary"):
        interaction_test(y, y, y, y * 2)
