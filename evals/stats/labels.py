"""Categorical predictions: confusion matrices and marginal homogeneity.

For multiple-choice tasks a serving change can shift *which* wrong answer a model
gives (say, towards option "A") without changing accuracy much. The test of
marginal homogeneity asks whether the distribution of predicted labels differs
between baseline and candidate on the same items: Stuart (1955, Biometrika
42:412-416) and Maxwell (1970, Br J Psychiatry 116:651-655), or Bhapkar (1966,
JASA 61:228-235). The statistics are computed as
:meth:`statsmodels.stats.contingency_tables.SquareTable.homogeneity` (0.14) computes them,
without importing statsmodels (and the pandas it imports, ~0.4 s of every run with a label
task); the tests check them against statsmodels and against a generalised-inverse form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats
from scipy.sparse import csgraph

from .validation import as_categories

METHODS = ("stuart_maxwell", "bhapkar")


def _codes(labels: Any, categories: tuple[Any, ...], n: int | None, name: str) -> np.ndarray:
    """Index of each label in ``categories``; ValueError naming the first unknown label."""
    if isinstance(labels, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of labels, one per item; got a string.")
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "iu" and \
            categories == tuple(range(len(categories))):
        # already codes (0..k-1): checked in bulk, no per-item lookups
        if n is not None and labels.size != n:
            raise ValueError(f"{name} has {labels.size} labels but there are {n} items; give "
                             "one label per item.")
        outside = (labels < 0) | (labels >= len(categories))
        if outside.any():
            i = int(np.argmax(outside))
            raise ValueError(f"{name} has the label {labels[i]!r} at index {i}, which is not "
                             f"one of the categories {list(categories)!r}.")
        return labels.astype(np.intp)
    values = list(labels)  # not via numpy, which would coerce mixed labels to strings
    if n is not None and len(values) != n:
        raise ValueError(
            f"{name} has {len(values)} labels but there are {n} items; give one label per item."
        )
    lookup = {category: code for code, category in enumerate(categories)}
    raw = list(map(lookup.get, values))  # one dict lookup per item, no per-item numpy writes
    if None in raw:
        i = raw.index(None)
        raise ValueError(
            f"{name} has the label {values[i]!r} at index {i}, which is not one of the "
            f"categories {list(categories)!r}; add it to categories or fix the label."
        )
    return np.array(raw, dtype=np.intp)


def _paired_codes(first: Any, second: Any, categories: Any, names: tuple[str, str]):
    cats = as_categories(categories)
    a = _codes(first, cats, None, names[0])
    b = _codes(second, cats, a.size, names[1])
    if a.size == 0:
        raise ValueError(f"{names[0]} is empty; at least one item is needed.")
    return cats, a, b


def confusion_matrix(
    true_labels: Sequence[Any], predicted: Sequence[Any], categories: Sequence[Any]
) -> np.ndarray:
    """Counts ``table[i, j]`` of items labelled ``categories[i]`` and predicted ``categories[j]``.

    Returns an int64 array of shape (k, k). Any label outside ``categories`` is a ValueError.
    """
    cats, truth, pred = _paired_codes(
        true_labels, predicted, categories, ("true_labels", "predicted")
    )
    k = len(cats)
    return np.bincount(truth * k + pred, minlength=k * k).reshape(k, k).astype(np.int64)


@dataclass(frozen=True, slots=True)
class PerClassAccuracy:
    """Accuracy within each true class."""

    categories: tuple[Any, ...]
    correct: tuple[int, ...]
    """Items of each true class predicted correctly."""
    support: tuple[int, ...]
    """Items of each true class."""

    @property
    def accuracy(self) -> tuple[float | None, ...]:
        """Per-class accuracy; None for a class with no items (undefined, not NaN)."""
        return tuple(c / s if s else None for c, s in zip(self.correct, self.support, strict=True))


def per_class_accuracy(
    true_labels: Sequence[Any], predicted: Sequence[Any], categories: Sequence[Any]
) -> PerClassAccuracy:
    """Accuracy of ``predicted`` within each class of ``true_labels``."""
    table = confusion_matrix(true_labels, predicted, categories)
    return PerClassAccuracy(
        categories=as_categories(categories),
        correct=tuple(int(v) for v in np.diag(table)),
        support=tuple(int(v) for v in table.sum(axis=1)),
    )


@dataclass(frozen=True, slots=True, eq=False)
class MarginalHomogeneityResult:
    """Test that baseline and candidate predict each label equally often."""

    statistic: float
    """Chi-square statistic (0.0 when degenerate; inf when the Bhapkar covariance is singular)."""
    pvalue: float
    df: int
    """Degrees of freedom: informative categories minus connected groups of them."""
    method: str
    categories: tuple[Any, ...]
    """Categories kept in the test, in the caller's order."""
    table: np.ndarray
    """Counts, rows = baseline label, columns = candidate label, over ``categories``."""
    degenerate: str | None = None
    """Why the test carries no information, else None."""


def _homogeneity_statistic(table: np.ndarray, method: str) -> float:
    """The Stuart-Maxwell or Bhapkar chi-square statistic of a square table of counts, as
    statsmodels' ``SquareTable(table, shift_zeros=False).homogeneity(method)`` computes it
    (margins of the cell shares without the last category, the covariance solved, times n);
    nan where the covariance cannot be inverted."""
    table = np.asarray(table, dtype=np.float64)
    if table.shape[0] == 1:
        return 0.0
    n_obs = table.sum()
    pr = table / n_obs
    row, col = pr.sum(1)[0:-1], pr.sum(0)[0:-1]
    pr = pr[0:-1, 0:-1]
    d = col - row
    if method == "bhapkar":
        vmat = -(pr + pr.T) - np.outer(d, d)
        np.fill_diagonal(vmat, col + row - 2 * np.diag(pr) - d**2)
    else:
        vmat = -(pr + pr.T)
        np.fill_diagonal(vmat, row + col - 2 * np.diag(pr))
    try:
        return float(n_obs * np.dot(d, np.linalg.solve(vmat, d)))
    except np.linalg.LinAlgError:
        return float("nan")


def marginal_homogeneity(
    pred_baseline: Sequence[Any],
    pred_candidate: Sequence[Any],
    categories: Sequence[Any],
    method: str = "stuart_maxwell",
) -> MarginalHomogeneityResult:
    """Stuart-Maxwell or Bhapkar test of marginal homogeneity for paired labels.

    Categories that never change label (no item moves into or out of them) carry no
    information about a shift and make the covariance singular, so they are dropped;
    this includes categories that never occur. When the remaining categories split
    into groups that never exchange items, the Stuart-Maxwell statistic is the sum
    of the per-group statistics (the covariance is block diagonal) and the Bhapkar
    statistic follows from it by W_B = W_SM / (1 - W_SM / n). (Bhapkar's covariance is
    the Stuart-Maxwell covariance minus d d', so this is the Sherman-Morrison formula;
    the tests check it against statsmodels on connected tables.)
    Degenerate inputs (no item changed label) give pvalue 1.0 with a note.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}; got {method!r}.")
    cats, base, cand = _paired_codes(
        pred_baseline, pred_candidate, categories, ("pred_baseline", "pred_candidate")
    )
    k = len(cats)
    full = np.bincount(base * k + cand, minlength=k * k).reshape(k, k)
    n_items = int(full.sum())
    off = full - np.diag(np.diag(full))
    keep = (off.sum(axis=0) + off.sum(axis=1)) > 0
    kept = tuple(c for c, flag in zip(cats, keep, strict=True) if flag)
    table = full[np.ix_(keep, keep)]
    if len(kept) < 2:
        occurring = int(((full.sum(axis=0) + full.sum(axis=1)) > 0).sum())
        reason = (
            "fewer than two categories occur"
            if occurring < 2
            else "no item changed label (the table is diagonal)"
        )
        return MarginalHomogeneityResult(
            0.0, 1.0, 0, method, kept, table, degenerate=f"{reason}; p-value set to 1"
        )
    n_groups, group = csgraph.connected_components(table + table.T, directed=False)
    df = len(kept) - n_groups
    # Sum the Stuart-Maxwell statistic over groups that exchange items (one group usually).
    stuart = 0.0
    for g in range(n_groups):
        members = np.flatnonzero(group == g)
        sub = table[np.ix_(members, members)]
        stuart += _homogeneity_statistic(sub, "stuart_maxwell")
    if method == "stuart_maxwell":
        return MarginalHomogeneityResult(
            stuart, float(stats.chi2.sf(stuart, df)), df, method, kept, table
        )
    ratio = stuart / n_items
    if n_groups == 1 and len(kept) == k and ratio < 1.0 - 1e-12:
        statistic = _homogeneity_statistic(table, "bhapkar")
        return MarginalHomogeneityResult(
            statistic, float(1 - stats.chi2.cdf(statistic, k - 1)), k - 1, method, kept, table
        )
    if ratio >= 1.0 - 1e-12:
        return MarginalHomogeneityResult(
            float("inf"),
            0.0,
            df,
            method,
            kept,
            table,
            degenerate=(
                "the Bhapkar covariance is singular (every item that changed moved "
                "the same way and no item kept its label); statistic is infinite"
            ),
        )
    bhapkar = stuart / (1.0 - ratio)
    return MarginalHomogeneityResult(
        bhapkar, float(stats.chi2.sf(bhapkar, df)), df, method, kept, table
    )
