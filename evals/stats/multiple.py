"""Adjusting p-values across tasks: Holm and Benjamini-Hochberg.

When the gate runs one test per task, the chance that at least one task shows a
false regression grows with the number of tasks. Holm (1979, Scand J Statist
6:65-70) controls the family-wise error rate; Benjamini & Hochberg (1995, JRSS-B
57:289-300) control the false discovery rate. Both computed directly with numpy (the
tests check them against :func:`statsmodels.stats.multitest.multipletests`, which is
slow for a handful of p-values because it runs a garbage collection on every call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .validation import as_score_array, check_alpha


@dataclass(frozen=True, slots=True, eq=False)
class MultipleTestingResult:
    """Adjusted p-values and rejections, in the order the p-values were given."""

    pvalues_adjusted: np.ndarray
    reject: np.ndarray
    """True where the adjusted p-value is <= alpha."""
    alpha: float
    method: str
    """'holm' or 'benjamini_hochberg'."""


def _holm_adjusted(p: np.ndarray) -> np.ndarray:
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def _bh_adjusted(p: np.ndarray) -> np.ndarray:
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, m / np.arange(1, m + 1) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.minimum.accumulate(stepped[::-1])[::-1]
    return adjusted


def _adjust(pvalues: Any, alpha: float, method: str) -> MultipleTestingResult:
    values = as_score_array(pvalues, "pvalues")
    outside = (values < 0.0) | (values > 1.0)
    if outside.any():
        index = int(np.argmax(outside))
        raise ValueError(f"pvalues must lie in [0, 1]; got {values[index]} at index {index}.")
    alpha = check_alpha(alpha)
    adjusted = (_holm_adjusted if method == "holm" else _bh_adjusted)(values)
    reject = adjusted <= alpha
    adjusted.setflags(write=False)
    reject.setflags(write=False)
    return MultipleTestingResult(
        pvalues_adjusted=adjusted, reject=reject, alpha=alpha, method=method
    )


def holm(pvalues: Any, alpha: float = 0.05) -> MultipleTestingResult:
    """Holm's step-down adjustment (family-wise error rate <= alpha)."""
    return _adjust(pvalues, alpha, "holm")


def benjamini_hochberg(pvalues: Any, alpha: float = 0.05) -> MultipleTestingResult:
    """Benjamini-Hochberg step-up adjustment (false discovery rate <= alpha)."""
    return _adjust(pvalues, alpha, "benjamini_hochberg")
