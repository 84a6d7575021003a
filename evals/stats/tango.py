"""Tango's score test and interval for a paired difference of proportions.

Tango, T. (1998). Equivalence test and confidence interval for the difference in
proportions for the paired-sample design. Statistics in Medicine 17:891-908.

Notation follows the paper with the candidate as the first measurement:
``n12`` = items wrong under the baseline and correct under the candidate,
``n21`` = items correct under the baseline and wrong under the candidate, and
``delta = (n12 - n21) / n`` = accuracy(candidate) - accuracy(baseline). For a
hypothesised difference ``delta0`` the score statistic is

    Z(delta0) = (n12 - n21 - n * delta0) / sqrt(n * (2 * q + delta0 * (1 - delta0)))

where ``q`` is the maximum-likelihood estimate of P(correct -> wrong) restricted to
``delta = delta0``, the positive root of Tango's quadratic
``2n q^2 + (-n12 - n21 + (2n - n12 + n21) delta0) q - n21 delta0 (1 - delta0) = 0``.
The interval is the set of ``delta0`` whose two-sided score test does not reject.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy import optimize, stats

from .binary import FlipCounts, flip_counts
from .intervals import ConfidenceInterval, DEFAULT_CONFIDENCE_LEVEL
from .validation import check_alpha, check_confidence_level, check_margin

# Interval ends are searched on [-1 + _EDGE, 1 - _EDGE]; the score statistic is
# singular at +-1 exactly.
_EDGE = 1e-12


def _restricted_q(n12: int, n21: int, n: int, delta0: float) -> float:
    """Restricted MLE of P(correct -> wrong) under delta = delta0 (Tango 1998, eq. 6)."""
    a = 2.0 * n
    b = -n12 - n21 + (2.0 * n - n12 + n21) * delta0
    c = -n21 * delta0 * (1.0 - delta0)
    root = math.sqrt(max(b * b - 4.0 * a * c, 0.0))
    # Same root as (root - b) / (2a), written to avoid cancellation when b > 0.
    return (root - b) / (2.0 * a) if b <= 0 else (-2.0 * c) / (b + root)


def tango_score_statistic(n12: int, n21: int, n: int, delta0: float) -> float:
    """Tango's score statistic Z(delta0); +-inf where the null variance is zero."""
    numerator = n12 - n21 - n * delta0
    variance = n * (2.0 * _restricted_q(n12, n21, n, delta0) + delta0 * (1.0 - delta0))
    if variance <= 0.0:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def tango_score_interval(
    wrong_to_correct: int, correct_to_wrong: int, n: int, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL
) -> ConfidenceInterval:
    """Tango (1998) score interval for accuracy(candidate) - accuracy(baseline).

    Found by inverting the two-sided score test: each limit solves ``Z(delta0) = +-z``
    with :func:`scipy.optimize.brentq` (Z decreases in delta0).
    """
    level = check_confidence_level(confidence_level)
    n12, n21 = int(wrong_to_correct), int(correct_to_wrong)
    if n < 1 or n12 < 0 or n21 < 0 or n12 + n21 > n:
        raise ValueError(
            f"counts must satisfy 0 <= wrong_to_correct + correct_to_wrong <= n with n >= 1; "
            f"got wrong_to_correct={n12}, correct_to_wrong={n21}, n={n}."
        )
    z = stats.norm.ppf(0.5 + level / 2.0)
    estimate = (n12 - n21) / n

    def score(delta0: float) -> float:
        # At the estimate the numerator is zero; define Z = 0 there even when the
        # null variance also vanishes (no discordant pairs and delta0 = 0).
        return 0.0 if delta0 == estimate else tango_score_statistic(n12, n21, n, delta0)

    def solve(target: float, inner: float, outer: float) -> float:
        if (score(outer) - target) * (score(inner) - target) > 0:
            return outer  # the test never rejects on this side: the limit is the boundary
        return optimize.brentq(
            lambda d: score(d) - target,
            min(inner, outer),
            max(inner, outer),
            xtol=1e-14,
            rtol=1e-15,
            maxiter=200,
        )

    low = -1.0 if estimate <= -1.0 + _EDGE else solve(z, estimate, -1.0 + _EDGE)
    high = 1.0 if estimate >= 1.0 - _EDGE else solve(-z, estimate, 1.0 - _EDGE)
    return ConfidenceInterval(float(low), float(high))


@dataclass(frozen=True, slots=True)
class TangoResult:
    """Tango score test of non-inferiority: H0 delta <= -margin vs H1 delta > -margin."""

    statistic: float
    """Score statistic Z(-margin); large values favour non-inferiority."""
    pvalue: float
    """One-sided p-value, P(N(0,1) >= statistic)."""
    delta: float
    """Observed accuracy difference, candidate minus baseline."""
    margin: float
    alpha: float
    noninferior: bool
    """True when pvalue < alpha: the data show the candidate loses less than ``margin``."""
    n: int
    wrong_to_correct: int
    correct_to_wrong: int

    def confidence_interval(self, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL) -> ConfidenceInterval:
        """Two-sided Tango score interval for the accuracy difference.

        ``pvalue < alpha`` exactly when the lower limit at level ``1 - 2 * alpha``
        lies above ``-margin``.
        """
        return tango_score_interval(
            self.wrong_to_correct, self.correct_to_wrong, self.n, confidence_level
        )


def tango_noninferiority(
    baseline: Any, candidate: Any, margin: float, alpha: float = 0.05
) -> TangoResult:
    """Tango (1998) score test that the candidate loses less than ``margin`` accuracy.

    ``baseline`` and ``candidate`` are aligned 0/1 scores; ``margin`` is in accuracy
    units (0.02 = 2 points). Tests H0: delta <= -margin against H1: delta > -margin.
    """
    return tango_noninferiority_from_counts(flip_counts(baseline, candidate), margin, alpha)


def tango_noninferiority_from_counts(
    counts: FlipCounts, margin: float, alpha: float = 0.05
) -> TangoResult:
    """:func:`tango_noninferiority` for an already counted :class:`FlipCounts` table."""
    margin = check_margin(margin)
    alpha = check_alpha(alpha)
    z = tango_score_statistic(counts.wrong_to_correct, counts.correct_to_wrong, counts.n, -margin)
    pvalue = float(stats.norm.sf(z))
    return TangoResult(
        statistic=float(z),
        pvalue=pvalue,
        delta=counts.delta,
        margin=margin,
        alpha=alpha,
        noninferior=pvalue < alpha,
        n=counts.n,
        wrong_to_correct=counts.wrong_to_correct,
        correct_to_wrong=counts.correct_to_wrong,
    )
