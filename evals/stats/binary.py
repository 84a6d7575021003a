"""Paired binary scores: flip counts and the exact McNemar test.

Each item is scored 0/1 under the baseline and the candidate engine. Only the
discordant items (those that flip) carry information about a change in accuracy:
with ``b`` items going correct -> wrong and ``c`` going wrong -> correct, the
accuracy difference is ``(c - b) / n``. Under "no change" each discordant item is
equally likely to flip either way, so ``b | b + c ~ Binomial(b + c, 1/2)``
(McNemar 1947, Psychometrika 12:153-157; exact conditional form as in
Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .intervals import ConfidenceInterval, DEFAULT_CONFIDENCE_LEVEL
from .validation import as_paired_binary, check_alternative, check_confidence_level

# The McNemar test is stated in terms of the correct->wrong count; `alternative`
# is stated in terms of the accuracy difference. These map one to the other.
_BINOMTEST_ALTERNATIVE = {"less": "greater", "greater": "less", "two-sided": "two-sided"}

NO_DISCORDANT_PAIRS = (
    "no discordant pairs: no item changed correctness, so the data carry no evidence "
    "of a change in either direction (p-value set to 1)"
)


@dataclass(frozen=True, slots=True)
class FlipCounts:
    """The paired 2x2 table of one baseline/candidate comparison."""

    n: int
    """Number of paired items."""
    both_correct: int
    """Items correct under both engines."""
    both_wrong: int
    """Items wrong under both engines."""
    correct_to_wrong: int
    """Items correct under the baseline and wrong under the candidate (regressions)."""
    wrong_to_correct: int
    """Items wrong under the baseline and correct under the candidate (improvements)."""

    @property
    def discordant(self) -> int:
        """Items whose correctness changed in either direction."""
        return self.correct_to_wrong + self.wrong_to_correct

    @property
    def flip_rate(self) -> float:
        """Share of items whose correctness changed (the discordance rate)."""
        return self.discordant / self.n

    @property
    def delta(self) -> float:
        """Accuracy difference, candidate minus baseline."""
        return (self.wrong_to_correct - self.correct_to_wrong) / self.n


def flip_counts(baseline: Any, candidate: Any) -> FlipCounts:
    """Count the four kinds of paired binary outcome.

    ``baseline`` and ``candidate`` are 0/1 (or bool) scores of the same items in the
    same order. Raises ValueError for NaN, non-binary values or unequal lengths.
    """
    base, cand = as_paired_binary(baseline, candidate)
    both_correct = int(np.count_nonzero(base & cand))
    correct_to_wrong = int(np.count_nonzero(base)) - both_correct
    wrong_to_correct = int(np.count_nonzero(cand)) - both_correct
    n = int(base.size)
    return FlipCounts(
        n=n,
        both_correct=both_correct,
        both_wrong=n - both_correct - correct_to_wrong - wrong_to_correct,
        correct_to_wrong=correct_to_wrong,
        wrong_to_correct=wrong_to_correct,
    )


@dataclass(frozen=True, slots=True)
class McNemarResult:
    """Exact (conditional) McNemar test of a paired binary comparison."""

    statistic: int
    """Number of correct -> wrong items among the discordant ones."""
    pvalue: float
    """Exact binomial p-value for ``alternative``; 1.0 when there are no discordant pairs."""
    mid_pvalue: float
    """Mid-p value: the exact p-value minus half the probability of the observed count
    (Fagerland, Lydersen & Laake 2013). Closer to nominal size, not strictly conservative."""
    n_discordant: int
    """Number of items whose correctness changed."""
    correct_to_wrong: int
    wrong_to_correct: int
    alternative: str
    """Hypothesis about the accuracy difference candidate - baseline: 'less' means the
    alternative is "candidate is worse" (the regression direction)."""
    degenerate: str | None = None
    """Why the test carries no information (e.g. no discordant pairs), else None."""

    def confidence_interval(self, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL) -> ConfidenceInterval:
        """Clopper-Pearson interval for P(correct -> wrong | item changed).

        A value of 0.5 means flips are balanced; above 0.5 means the candidate loses more
        items than it gains. With no discordant pairs the interval is (0, 1).
        """
        level = check_confidence_level(confidence_level)
        if self.n_discordant == 0:
            return ConfidenceInterval(0.0, 1.0)
        ci = stats.binomtest(self.correct_to_wrong, self.n_discordant).proportion_ci(
            confidence_level=level, method="exact"
        )
        return ConfidenceInterval(float(ci.low), float(ci.high))


def mcnemar_exact(baseline: Any, candidate: Any, alternative: str = "less") -> McNemarResult:
    """Exact McNemar test on paired 0/1 scores, with its mid-p variant.

    The default ``alternative='less'`` tests H0 "the candidate is not worse" against
    H1 "the candidate's accuracy is lower" (one-sided regression gate). 'greater' tests
    for an improvement and 'two-sided' for any change. The p-value comes from
    :func:`scipy.stats.binomtest` on the discordant pairs (McNemar 1947; exact
    conditional test); the mid-p value follows Fagerland, Lydersen & Laake (2013).
    """
    check_alternative(alternative)
    return mcnemar_exact_from_counts(flip_counts(baseline, candidate), alternative)


def mcnemar_exact_from_counts(counts: FlipCounts, alternative: str = "less") -> McNemarResult:
    """:func:`mcnemar_exact` for an already counted :class:`FlipCounts` table."""
    check_alternative(alternative)
    b, c = counts.correct_to_wrong, counts.wrong_to_correct
    m = b + c
    if m == 0:
        return McNemarResult(
            statistic=0,
            pvalue=1.0,
            mid_pvalue=1.0,
            n_discordant=0,
            correct_to_wrong=0,
            wrong_to_correct=0,
            alternative=alternative,
            degenerate=NO_DISCORDANT_PAIRS,
        )
    pvalue = stats.binomtest(b, m, 0.5, alternative=_BINOMTEST_ALTERNATIVE[alternative]).pvalue
    half_point = 0.5 * stats.binom.pmf(b, m, 0.5)
    if alternative == "less":  # large b is evidence of regression: P(X >= b) - P(X = b)/2
        mid = stats.binom.sf(b, m, 0.5) + half_point
    elif alternative == "greater":
        mid = stats.binom.cdf(b, m, 0.5) - half_point
    else:  # Fagerland et al. (2013), eq. for the two-sided mid-p
        low = min(b, c)
        mid = 2.0 * (stats.binom.cdf(low, m, 0.5) - 0.5 * stats.binom.pmf(low, m, 0.5))
    return McNemarResult(
        statistic=b,
        pvalue=float(min(1.0, pvalue)),
        mid_pvalue=float(min(1.0, max(0.0, mid))),
        n_discordant=m,
        correct_to_wrong=b,
        wrong_to_correct=c,
        alternative=alternative,
    )
