"""Flip counts and the exact McNemar test against independent references."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from evals.stats import FlipCounts, flip_counts, mcnemar_exact, mcnemar_exact_from_counts


def exact_tail_at_least(k: int, m: int) -> float:
    """P(X >= k) for X ~ Binomial(m, 1/2), in exact rational arithmetic."""
    return float(Fraction(sum(comb(m, j) for j in range(k, m + 1)), 2**m))


def exact_mid_p_regression(k: int, m: int) -> float:
    return float(
        Fraction(sum(comb(m, j) for j in range(k + 1, m + 1)) * 2 + comb(m, k), 2 ** (m + 1))
    )


def test_flip_counts_counts_each_cell(make_pairs):
    base, cand = make_pairs(5, 3, 2, 7, rng=np.random.default_rng(0))
    counts = flip_counts(base, cand)
    assert counts == FlipCounts(
        n=17, both_correct=5, both_wrong=7, correct_to_wrong=3, wrong_to_correct=2
    )
    assert counts.discordant == 5
    assert counts.flip_rate == pytest.approx(5 / 17, rel=1e-15)
    assert counts.delta == pytest.approx((2 - 3) / 17, rel=1e-15)


def test_flip_counts_accepts_bools():
    counts = flip_counts([True, False, True], [False, False, True])
    assert (counts.correct_to_wrong, counts.wrong_to_correct, counts.both_correct) == (1, 0, 1)


@pytest.mark.parametrize(
    "table", [(59, 16, 6, 80), (40, 9, 2, 30), (100, 3, 12, 5), (10, 25, 25, 3)]
)
def test_two_sided_pvalue_matches_statsmodels(make_pairs, table):
    both_correct, c2w, w2c, both_wrong = table
    result = mcnemar_exact(*make_pairs(*table), alternative="two-sided")
    reference = mcnemar(np.array([[both_correct, c2w], [w2c, both_wrong]]), exact=True).pvalue
    assert result.pvalue == pytest.approx(reference, rel=1e-9)


@pytest.mark.parametrize("c2w, w2c", [(16, 6), (6, 16), (0, 5), (5, 0), (30, 30), (1, 0)])
def test_one_sided_pvalues_match_exact_binomial_sums(make_pairs, c2w, w2c):
    base, cand = make_pairs(20, c2w, w2c, 10)
    m = c2w + w2c
    less = mcnemar_exact(base, cand, alternative="less")
    greater = mcnemar_exact(base, cand, alternative="greater")
    assert less.pvalue == pytest.approx(exact_tail_at_least(c2w, m), rel=1e-9)
    assert greater.pvalue == pytest.approx(exact_tail_at_least(w2c, m), rel=1e-9)
    assert less.mid_pvalue == pytest.approx(exact_mid_p_regression(c2w, m), rel=1e-9)
    assert greater.mid_pvalue == pytest.approx(exact_mid_p_regression(w2c, m), rel=1e-9)
    assert less.statistic == c2w and less.n_discordant == m
    assert less.pvalue == pytest.approx(
        stats.binomtest(w2c, m, 0.5, alternative="less").pvalue, rel=1e-9
    )


def test_textbook_example_cavo_2012(make_pairs):
    """Fagerland, Lydersen & Laake (2017), *Statistical Analysis of Contingency Tables*,
    ch. 8, complete response before/after consolidation therapy (Cavo et al. 2012),
    table [[59, 6], [16, 80]]: exact conditional P = 0.052479, mid-P = 0.034690
    (values as printed by the book's R package ``contingencytables``)."""
    result = mcnemar_exact(*make_pairs(59, 16, 6, 80), alternative="two-sided")
    assert result.pvalue == pytest.approx(0.052479, abs=5e-7)
    assert result.mid_pvalue == pytest.approx(0.034690, abs=5e-7)


def test_alternative_less_is_the_regression_direction(make_pairs):
    worse = mcnemar_exact(*make_pairs(50, 20, 4, 26))
    better = mcnemar_exact(*make_pairs(50, 4, 20, 26))
    assert worse.alternative == "less"
    assert worse.pvalue < 0.01
    assert better.pvalue > 0.99


def test_no_discordant_pairs_is_labelled_not_nan(make_pairs):
    for alternative in ("less", "greater", "two-sided"):
        result = mcnemar_exact(*make_pairs(7, 0, 0, 3), alternative=alternative)
        assert result.pvalue == 1.0 and result.mid_pvalue == 1.0
        assert result.degenerate is not None and "no discordant pairs" in result.degenerate
        assert result.confidence_interval() == (0.0, 1.0)


def test_single_item():
    result = mcnemar_exact([1], [0])
    assert (result.n_discordant, result.pvalue) == (1, 0.5)
    assert mcnemar_exact([1], [1]).degenerate is not None


def test_confidence_interval_is_clopper_pearson(make_pairs):
    result = mcnemar_exact(*make_pairs(10, 12, 5, 3))
    ci = result.confidence_interval(0.9)
    # Clopper-Pearson limits from the beta distribution.
    assert ci.low == pytest.approx(stats.beta.ppf(0.05, 12, 6), rel=1e-9)
    assert ci.high == pytest.approx(stats.beta.ppf(0.95, 13, 5), rel=1e-9)


def test_from_counts_matches_arrays(make_pairs):
    base, cand = make_pairs(10, 12, 5, 3)
    assert mcnemar_exact_from_counts(flip_counts(base, cand)) == mcnemar_exact(base, cand)


def test_result_is_frozen(make_pairs):
    result = mcnemar_exact(*make_pairs(10, 2, 1, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.pvalue = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "baseline, candidate, message",
    [
        ([1, 0, np.nan], [1, 0, 1], "index 2"),
        ([1, 0, 1], [1, 0.5, 1], "0.5"),
        ([1, 2, 1], [1, 0, 1], "index 1"),
        ([1, 0], [1, 0, 1], "same items"),
        ([], [], "empty"),
        ([[1, 0]], [[1, 0]], "one-dimensional"),
    ],
)
def test_bad_inputs_raise_sentences(baseline, candidate, message):
    with pytest.raises(ValueError, match=message):
        mcnemar_exact(baseline, candidate)


def test_bad_alternative():
    with pytest.raises(ValueError, match="'two-sided', 'less', 'greater'"):
        mcnemar_exact([1], [0], alternative="smaller")


def _false_alarm_rate(baseline: np.ndarray, candidate: np.ndarray, alpha: float) -> float:
    rejections = [
        mcnemar_exact(b, c).pvalue <= alpha for b, c in zip(baseline, candidate, strict=True)
    ]
    return float(np.mean(rejections))


def test_false_alarm_rate_under_identical_engines():
    """Both arms draw each item's correctness independently from the same item-level
    probability (heterogeneous difficulty): no true difference."""
    rng = np.random.default_rng(20240611)
    reps, n, alpha = 2500, 400, 0.05
    difficulty = rng.beta(2, 2, size=(reps, n))
    baseline = rng.random((reps, n)) < difficulty
    candidate = rng.random((reps, n)) < difficulty
    rate = _false_alarm_rate(baseline, candidate, alpha)
    assert rate <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / reps)


def test_false_alarm_rate_under_symmetric_nondeterministic_flips(simulate):
    """Deterministic engine except for 15% unstable items that flip either way with
    equal probability (e.g. batch-dependent numerics): no true difference."""
    rng = np.random.default_rng(7)
    reps, n, alpha = 2500, 1000, 0.05
    baseline, candidate = simulate(rng, reps, n, p_loss=0.04, p_gain=0.04, accuracy=0.7)
    rate = _false_alarm_rate(baseline, candidate, alpha)
    assert rate <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / reps)
