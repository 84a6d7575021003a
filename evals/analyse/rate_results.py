"""What a sampled task's analysis adds to its `TaskAnalysis` (issue 53, `repeats: k`):
the repeats behind its rate test and its answer-distribution check. Computed by
evals.analyse.repeats_analysis."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AnswerDistribution:
    """The answer-distribution check of one task: do the arms' answers over the k repeats
    come from the same distribution at every item?"""

    statistic: float
    pvalue: float
    null_mean: float
    n_items: int
    repeats: int
    informative_items: int
    changed: bool
    """p <= alpha (before any correction over tasks)."""
    top_items: tuple[dict, ...]
    """Up to five items that moved the most: doc_id and both arms' answer counts."""


@dataclass(frozen=True, slots=True)
class RepeatsSummary:
    """What the rate test saw: k repeats per item and the spread of the item rates."""

    repeats: int
    method: str
    missing: int
    items_dropped: int
    """Items whose pass rate fell (d_i < 0)."""
    items_gained: int
