"""Output-length shifts: paired length changes, empty outputs and truncation.

A serving optimisation that changes decoding can make answers longer, shorter,
empty, or cut off at the token limit before accuracy visibly moves. These
statistics flag such shifts on the same items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .validation import as_paired_arrays, as_paired_binary, check_alternative

ALL_ZERO_DIFFERENCES = (
    "every item has the same length under both engines; there is no shift to test "
    "(p-value set to 1)"
)


@dataclass(frozen=True, slots=True)
class LengthShiftResult:
    """Wilcoxon signed-rank test of paired length differences (candidate - baseline)."""

    statistic: float
    """Wilcoxon statistic as returned by scipy (0.0 when degenerate)."""
    pvalue: float
    median_difference: float
    """Median of candidate length minus baseline length."""
    mean_difference: float
    n: int
    n_changed: int
    """Items whose length differs (zero differences are dropped by the test)."""
    alternative: str
    """'greater' means the alternative "candidate outputs are longer"."""
    degenerate: str | None = None


def paired_length_shift(
    len_baseline: Any, len_candidate: Any, alternative: str = "two-sided"
) -> LengthShiftResult:
    """Wilcoxon signed-rank test that output lengths shifted between engines.

    Wilcoxon (1945), Biometrics Bulletin 1:80-83, via :func:`scipy.stats.wilcoxon`
    on candidate - baseline with zero differences dropped (Wilcoxon's treatment).
    Lengths are non-negative numbers (tokens or characters) of the same items. When
    every difference is zero the result is labelled degenerate with pvalue 1.0.
    """
    check_alternative(alternative)
    base, cand = as_paired_arrays(len_baseline, len_candidate, ("len_baseline", "len_candidate"))
    for name, values in (("len_baseline", base), ("len_candidate", cand)):
        if (values < 0).any():
            index = int(np.argmax(values < 0))
            raise ValueError(
                f"{name} has a negative length ({values[index]}) at index {index}; "
                "lengths must be >= 0."
            )
    differences = cand - base
    n_changed = int(np.count_nonzero(differences))
    common = {
        "median_difference": float(np.median(differences)),
        "mean_difference": float(differences.mean()),
        "n": int(differences.size),
        "n_changed": n_changed,
        "alternative": alternative,
    }
    if n_changed == 0:
        return LengthShiftResult(
            statistic=0.0, pvalue=1.0, degenerate=ALL_ZERO_DIFFERENCES, **common
        )
    result = stats.wilcoxon(differences, zero_method="wilcox", alternative=alternative)
    return LengthShiftResult(
        statistic=float(result.statistic), pvalue=float(result.pvalue), **common
    )


@dataclass(frozen=True, slots=True)
class OutputShareShift:
    """How often a property of the output (empty, truncated) holds under each engine."""

    n: int
    baseline_count: int
    candidate_count: int
    became: int
    """Items without the property under the baseline and with it under the candidate."""
    recovered: int
    """Items with the property under the baseline and without it under the candidate."""
    pvalue: float
    """One-sided exact McNemar p-value for "the candidate has the property more often";
    1.0 when no item changed."""

    @property
    def share_baseline(self) -> float:
        """Share of items with the property under the baseline."""
        return self.baseline_count / self.n

    @property
    def share_candidate(self) -> float:
        """Share of items with the property under the candidate."""
        return self.candidate_count / self.n

    @property
    def share_became(self) -> float:
        """Share of all items that newly have the property under the candidate."""
        return self.became / self.n


def _share_shift(base: np.ndarray, cand: np.ndarray) -> OutputShareShift:
    became = int(np.count_nonzero(~base & cand))
    recovered = int(np.count_nonzero(base & ~cand))
    changed = became + recovered
    pvalue = (
        1.0
        if changed == 0
        else float(stats.binomtest(became, changed, 0.5, alternative="greater").pvalue)
    )
    return OutputShareShift(
        n=int(base.size),
        baseline_count=int(base.sum()),
        candidate_count=int(cand.sum()),
        became=became,
        recovered=recovered,
        pvalue=pvalue,
    )


def empty_output_shift(
    texts_baseline: Sequence[str], texts_candidate: Sequence[str]
) -> OutputShareShift:
    """Share of outputs that are empty after stripping whitespace, and how many became empty."""
    flags = []
    for name, texts in (("texts_baseline", texts_baseline), ("texts_candidate", texts_candidate)):
        if isinstance(texts, (str, bytes)):
            raise ValueError(f"{name} must be a sequence of output strings, not a single string.")
        texts = list(texts)
        if not set(map(type, texts)) <= {str}:
            i, text = next((i, t) for i, t in enumerate(texts) if not isinstance(t, str))
            raise ValueError(
                f"{name} has a {type(text).__name__} at index {i}; "
                "every output must be a string (use '' for no output)."
            )
        flags.append(np.array([not t.strip() for t in texts], dtype=bool))
    base, cand = as_paired_binary(flags[0], flags[1], ("texts_baseline", "texts_candidate"))
    return _share_shift(base, cand)


def truncation_shift(truncated_baseline: Any, truncated_candidate: Any) -> OutputShareShift:
    """Share of outputs that hit the max-token limit, from boolean flags per item."""
    base, cand = as_paired_binary(
        truncated_baseline, truncated_candidate, ("truncated_baseline", "truncated_candidate")
    )
    return _share_shift(base, cand)
