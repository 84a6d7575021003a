"""Confusion matrices and marginal homogeneity of predicted labels."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import SquareTable

from evals.stats import confusion_matrix, marginal_homogeneity, per_class_accuracy


def labels_from_table(table, categories):
    """Paired label lists whose cross-tabulation is ``table`` (rows baseline, cols candidate)."""
    baseline, candidate = [], []
    for i, row in enumerate(np.asarray(table)):
        for j, count in enumerate(row):
            baseline += [categories[i]] * int(count)
            candidate += [categories[j]] * int(count)
    return baseline, candidate


# Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables, ch. 9:
# pretherapy susceptibility of pathogens (Peterson et al. 2007).
PETERSON_2007 = np.array([[596, 18, 6, 5], [0, 2, 0, 0], [0, 0, 42, 0], [11, 0, 0, 0]])


def test_confusion_matrix_and_per_class_accuracy():
    truth = ["A", "B", "A", "C", "B", "A"]
    pred = ["A", "A", "A", "C", "B", "B"]
    table = confusion_matrix(truth, pred, ["A", "B", "C", "D"])
    expected = np.zeros((4, 4), dtype=int)
    for t, p in zip(truth, pred, strict=True):
        expected["ABCD".index(t), "ABCD".index(p)] += 1
    np.testing.assert_array_equal(table, expected)
    per_class = per_class_accuracy(truth, pred, ["A", "B", "C", "D"])
    assert per_class.support == (3, 2, 1, 0)
    assert per_class.accuracy == (2 / 3, 0.5, 1.0, None)


def test_unknown_label_is_named():
    with pytest.raises(ValueError, match=r"label 'E' at index 2.*categories"):
        confusion_matrix(["A", "B", "E"], ["A", "B", "A"], ["A", "B"])
    with pytest.raises(ValueError, match="3 labels but there are 2 items"):
        marginal_homogeneity(["A", "B"], ["A", "B", "A"], ["A", "B"])
    with pytest.raises(ValueError, match="distinct"):
        confusion_matrix(["A"], ["A"], ["A", "A"])
    with pytest.raises(ValueError, match="method must be one of"):
        marginal_homogeneity(["A"], ["A"], ["A"], method="mcnemar")


def test_textbook_example_peterson_2007():
    """Stuart test T0 = 26.250 (df 3, P = 0.000008) and Bhapkar T = 27.304
    (df 3, P = 0.000005), as printed by the book's R package ``contingencytables``."""
    cats = ["S", "I", "R", "NA"]
    base, cand = labels_from_table(PETERSON_2007, cats)
    stuart = marginal_homogeneity(base, cand, cats, method="stuart_maxwell")
    bhapkar = marginal_homogeneity(base, cand, cats, method="bhapkar")
    assert (stuart.df, bhapkar.df) == (3, 3)
    assert stuart.statistic == pytest.approx(26.250, abs=5e-4)
    assert stuart.pvalue == pytest.approx(0.000008, abs=5e-7)
    assert bhapkar.statistic == pytest.approx(27.304, abs=5e-4)
    assert bhapkar.pvalue == pytest.approx(0.000005, abs=5e-7)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("method", ["stuart_maxwell", "bhapkar"])
def test_matches_statsmodels_on_connected_tables(seed, method):
    rng = np.random.default_rng(seed)
    table = rng.integers(1, 30, size=(4, 4)) + np.diag(rng.integers(20, 200, 4))
    cats = ["A", "B", "C", "D"]
    result = marginal_homogeneity(*labels_from_table(table, cats), cats, method=method)
    reference = SquareTable(table, shift_zeros=False).homogeneity(method=method)
    # computed as statsmodels computes it (without importing it): the same bits
    assert result.statistic == reference.statistic
    if method == "bhapkar":
        assert result.pvalue == reference.pvalue
    assert result.pvalue == pytest.approx(reference.pvalue, rel=1e-9)
    assert result.df == reference.df
    np.testing.assert_array_equal(result.table, table)


def test_two_categories_reduce_to_mcnemar_chi_square():
    base, cand = labels_from_table([[40, 12], [5, 30]], ["yes", "no"])
    result = marginal_homogeneity(base, cand, ["yes", "no"])
    assert result.statistic == pytest.approx((12 - 5) ** 2 / (12 + 5), rel=1e-12)


def test_categories_that_never_occur_or_never_change_are_dropped():
    cats = ["S", "I", "R", "NA"]
    base, cand = labels_from_table(PETERSON_2007, cats)
    full = marginal_homogeneity(base, cand, cats, method="bhapkar")
    # Unused categories and a stable category with extra items do not change the test
    # (Bhapkar uses all n items, including the stable ones, as in the full table).
    padded = marginal_homogeneity(base, cand, ["unused"] + cats + ["never"], method="bhapkar")
    assert padded.statistic == pytest.approx(full.statistic, rel=1e-12)
    assert padded.categories == tuple(cats)
    stable = marginal_homogeneity(base + ["X"] * 9, cand + ["X"] * 9, cats + ["X"])
    assert stable.categories == tuple(cats) and stable.df == 3


def _pinv_statistics(table):
    """Moore-Penrose forms of both statistics on the full table (independent reference)."""
    table = np.asarray(table, dtype=float)
    n = table.sum()
    d = table.sum(axis=1) - table.sum(axis=0)
    sym = table + table.T
    cov = np.diag(sym.sum(axis=1) - np.diag(sym)) - (sym - np.diag(np.diag(sym)))
    stuart = d @ np.linalg.pinv(cov) @ d
    p, dp = cov / n, d / n
    bhapkar = n * dp @ np.linalg.pinv(p - np.outer(dp, dp)) @ dp
    return stuart, bhapkar, np.linalg.matrix_rank(cov)


def test_groups_that_never_exchange_items_use_the_generalised_inverse():
    table = np.array(
        [[50, 9, 0, 0, 0], [3, 40, 0, 0, 0], [0, 0, 30, 4, 6], [0, 0, 1, 20, 2], [0, 0, 5, 0, 25]]
    )
    cats = list("abcde")
    base, cand = labels_from_table(table, cats)
    stuart, bhapkar, rank = _pinv_statistics(table)
    sm_result = marginal_homogeneity(base, cand, cats, method="stuart_maxwell")
    bh_result = marginal_homogeneity(base, cand, cats, method="bhapkar")
    assert sm_result.statistic == pytest.approx(stuart, rel=1e-9)
    assert bh_result.statistic == pytest.approx(bhapkar, rel=1e-9)
    assert sm_result.df == bh_result.df == rank == 3


def test_degenerate_tables_give_pvalue_one_with_a_note():
    diagonal = marginal_homogeneity(["A", "B", "C"], ["A", "B", "C"], ["A", "B", "C"])
    assert (diagonal.pvalue, diagonal.statistic, diagonal.df) == (1.0, 0.0, 0)
    assert "no item changed label" in diagonal.degenerate
    single = marginal_homogeneity(["A", "A"], ["A", "A"], ["A", "B"])
    assert single.pvalue == 1.0 and "fewer than two categories" in single.degenerate


def test_one_way_shift_with_no_stable_items_is_labelled_for_bhapkar():
    base, cand = labels_from_table([[0, 5], [0, 0]], ["A", "B"])
    result = marginal_homogeneity(base, cand, ["A", "B"], method="bhapkar")
    assert result.statistic == np.inf and result.pvalue == 0.0 and result.degenerate
    assert not np.isnan(marginal_homogeneity(base, cand, ["A", "B"]).pvalue)
