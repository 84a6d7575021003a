"""Interaction of two optimizations on the same items: a 2x2 factorial over paired items.

Four arms score each of ``n`` items 0/1: ``y00`` (neither optimization), ``y10`` (the first
alone), ``y01`` (the second alone), ``y11`` (both). The item-level interaction contrast

    c_i = y11_i - y10_i - y01_i + y00_i = (y11_i - y01_i) - (y10_i - y00_i)

is the first optimization's effect on item i with the second on, minus its effect with
the second off. Its mean is the interaction on the accuracy scale; a negative mean is a
combination that loses more than its parts do (vLLM #43559: prefix caching alone and MTP
alone were fine, both together were not).

Test: the exact sign-flip (randomization) test of mean(c) = 0 (Fisher 1935; Good,
*Permutation Tests*, 2005, ch. 3). Its null is that, item by item, the first
optimization's effect with the second on and with it off are exchangeable; swapping them
flips the sign of c_i, so under the null every sign pattern of the non-zero contrasts is
equally likely. As c_i takes the values -2..2, the sum of the contrasts is, under the null,
(2 B1 - n1) + 2 (2 B2 - n2) with B1 ~ Binomial(n1, 1/2) and B2 ~ Binomial(n2, 1/2) for the
n1 items with |c_i| = 1 and n2 with |c_i| = 2; its distribution is computed exactly by
convolving the two. Items with c_i = 0 carry no information, as in McNemar's test.

Interval: the t interval of mean(c) (n - 1 degrees of freedom), as
``scipy.stats.ttest_1samp(c).confidence_interval()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .intervals import ConfidenceInterval, DEFAULT_CONFIDENCE_LEVEL
from .validation import as_binary, check_alternative, check_confidence_level

NO_CONTRAST = ("no item has a non-zero interaction contrast: the two optimizations' effects "
               "add up on every item (p-value set to 1)")


@dataclass(frozen=True, slots=True)
class InteractionResult:
    """Result of :func:`interaction_test` (fields as in scipy's result objects)."""

    statistic: float
    """Mean interaction contrast (accuracy units; negative: the combination loses more)."""
    pvalue: float
    n: int
    n_one: int
    """Items with |contrast| = 1."""
    n_two: int
    """Items with |contrast| = 2."""
    sum_contrast: int
    alternative: str
    standard_error: float
    _low: float
    _high: float
    confidence_level: float
    note: str | None = None

    def confidence_interval(self) -> ConfidenceInterval:
        return ConfidenceInterval(self._low, self._high)


def _null_pmf(n_one: int, n_two: int) -> tuple[np.ndarray, np.ndarray]:
    """Values and probabilities of the sum of contrasts under the null."""
    ones = stats.binom.pmf(np.arange(n_one + 1), n_one, 0.5)  # T1 = 2 B1 - n1
    twos = stats.binom.pmf(np.arange(n_two + 1), n_two, 0.5)  # T2 = 4 B2 - 2 n2
    # on the grid of step 1 from -(n1 + 2 n2): T1 moves by 2 per success, T2 by 4
    grid_ones = np.zeros(2 * n_one + 1)
    grid_ones[::2] = ones
    grid_twos = np.zeros(4 * n_two + 1)
    grid_twos[::4] = twos
    pmf = np.convolve(grid_ones, grid_twos)
    values = np.arange(pmf.size) - (n_one + 2 * n_two)
    return values, pmf


def interaction_test(y00: Any, y10: Any, y01: Any, y11: Any, *, alternative: str = "less",
                     confidence_level: float = DEFAULT_CONFIDENCE_LEVEL) -> InteractionResult:
    """Exact sign-flip test of the mean item-level interaction contrast (module docstring).

    ``alternative='less'``: the combination is worse than its parts add up to.
    """
    check_alternative(alternative)
    level = check_confidence_level(confidence_level)
    arms = [as_binary(y, name).astype(np.int64)
            for y, name in ((y00, "y00"), (y10, "y10"), (y01, "y01"), (y11, "y11"))]
    sizes = {a.size for a in arms}
    if len(sizes) != 1:
        raise ValueError(f"the four arms must score the same items; they have "
                         f"{', '.join(str(a.size) for a in arms)} items.")
    a00, a10, a01, a11 = arms
    contrast = a11 - a10 - a01 + a00
    n = contrast.size
    n_one, n_two = int(np.sum(np.abs(contrast) == 1)), int(np.sum(np.abs(contrast) == 2))
    total = int(contrast.sum())
    mean = total / n
    se = float(np.std(contrast, ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    if n > 1 and se > 0:
        t = stats.t.ppf(0.5 + level / 2, n - 1)
        low, high = mean - t * se, mean + t * se
    else:
        low = high = mean if n > 1 else float("nan")
    if n_one + n_two == 0:
        return InteractionResult(0.0, 1.0, n, 0, 0, 0, alternative, se, low, high, level,
                                 NO_CONTRAST)
    values, pmf = _null_pmf(n_one, n_two)
    less = float(pmf[values <= total].sum())
    greater = float(pmf[values >= total].sum())
    pvalue = {"less": less, "greater": greater,
              "two-sided": 2 * min(less, greater)}[alternative]
    return InteractionResult(mean, min(pvalue, 1.0), n, n_one, n_two, total, alternative, se,
                             low, high, level)
