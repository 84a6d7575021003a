"""Length shifts, empty outputs and truncation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from evals.stats import empty_output_shift, paired_length_shift, truncation_shift


def exact_signed_rank_pvalue(differences):
    """Two-sided exact Wilcoxon p-value by enumerating all sign assignments (no ties)."""
    d = np.asarray([x for x in differences if x != 0], dtype=float)
    ranks = np.argsort(np.argsort(np.abs(d))) + 1
    observed = ranks[d > 0].sum()
    total = ranks.sum()
    stats = [
        sum(r for r, s in zip(ranks, signs, strict=True) if s)
        for signs in itertools.product([0, 1], repeat=d.size)
    ]
    stats = np.asarray(stats)
    extreme = min(observed, total - observed)
    return min(1.0, 2 * np.mean(stats <= extreme))


def test_wilcoxon_matches_enumeration():
    base = np.array([120, 80, 95, 200, 150, 60, 75, 130, 90, 110])
    cand = base + np.array([5, -3, 12, 20, -1, 7, 9, -15, 30, 4])
    result = paired_length_shift(base, cand)
    assert result.pvalue == pytest.approx(exact_signed_rank_pvalue(cand - base), rel=1e-9)
    assert result.n_changed == 10 and result.median_difference == pytest.approx(6.0)


def test_zero_differences_are_dropped_and_all_zero_is_degenerate():
    result = paired_length_shift([10, 20, 30, 40], [10, 25, 30, 33], alternative="greater")
    assert result.n_changed == 2
    same = paired_length_shift([10, 20], [10, 20])
    assert same.pvalue == 1.0 and same.degenerate is not None and same.statistic == 0.0


def test_longer_outputs_are_detected_one_sided():
    rng = np.random.default_rng(0)
    base = rng.integers(50, 300, 200)
    cand = base + rng.integers(0, 20, 200)
    assert paired_length_shift(base, cand, alternative="greater").pvalue < 1e-6
    assert paired_length_shift(base, cand, alternative="less").pvalue > 0.99


def test_length_validation():
    with pytest.raises(ValueError, match="negative length"):
        paired_length_shift([1, -2], [1, 2])
    with pytest.raises(ValueError, match="index 0"):
        paired_length_shift([np.nan, 2], [1, 2])


def test_empty_output_shift():
    base = ["answer", "  ", "x", "y", "z", "w"]
    cand = ["", "\n", "x", " ", "z", "w"]
    result = empty_output_shift(base, cand)
    assert (result.baseline_count, result.candidate_count, result.became, result.recovered) == (
        1,
        3,
        2,
        0,
    )
    assert result.share_became == pytest.approx(2 / 6)
    assert result.pvalue == pytest.approx(0.25)  # P(Bin(2, 1/2) >= 2)
    with pytest.raises(ValueError, match="index 1"):
        empty_output_shift(["a", None], ["a", "b"])
    with pytest.raises(ValueError, match="same items"):
        empty_output_shift(["a"], ["a", "b"])


def test_truncation_shift():
    result = truncation_shift([False, True, False, False], [True, False, True, False])
    assert (result.became, result.recovered, result.share_candidate) == (2, 1, 0.5)
    assert result.pvalue == pytest.approx(0.5)  # P(Bin(3, 1/2) >= 2)
    unchanged = truncation_shift([True, False], [True, False])
    assert unchanged.pvalue == 1.0
    with pytest.raises(ValueError, match="binary"):
        truncation_shift([0, 2], [0, 1])
