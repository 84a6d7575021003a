"""How many items x repeats: variance components of per-item rate differences, and power.

Model the sample-level differences D_ir = Y^c_ir - Y^b_ir (item i, repeat r; paired by
repeat when both arms draw repeat r with the same seed) as a one-way random-effects
layout with items random (Searle, Casella & McCulloch 1992, Variance Components, ch. 3):
an item's mean difference mu_i varies between items with variance sigma_b^2, and a
sample around its item's mean with variance sigma_w^2. The item's rate difference over
k repeats then has

    Var(d_i) = sigma_b^2 + sigma_w^2 / k,

so repeats cut only the within-item part: past k ~ sigma_w^2 / sigma_b^2 more repeats
buy little, and only more items help. The estimates are the ANOVA ones (unbiased; the
between part can come out negative and is then planned as 0).

For each k the planner finds the smallest n at which the paired t-test of the rate
differences (:func:`evals.stats.repeats.paired_rate_test`, ``method='t'``, one-sided at
alpha, n - 1 degrees of freedom) reaches the power, from the noncentral t distribution
with noncentrality effect * sqrt(n) / sd(d_i) (normal differences; Cohen 1988,
Statistical Power Analysis, ch. 2): once for detecting ``drop`` and once for showing
non-inferiority at ``margin`` when the true difference is ``true_delta``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats

from .validation import as_outcomes, check_alpha, check_margin, check_positive_int, check_power

_MAX_ITEMS = 10_000_000


@dataclass(frozen=True, slots=True)
class VarianceComponents:
    """Between- and within-item variance of the sample-level rate differences."""

    between_item_var: float
    """sigma_b^2: variance of the items' true mean differences (unbiased; may be < 0)."""
    within_item_var: float
    """sigma_w^2: variance of one sample's difference around its item's mean."""
    item_difference_var: float
    """Observed variance of the per-item rate differences at this pilot's k."""
    mean_difference: float
    n_items: int
    repeats: int
    paired_repeats: bool
    """True: repeat r of both arms is one pair (same seed); False: the arms' repeats are
    independent draws and the within part is the sum of the arms' within variances."""

    def item_difference_var_at(self, repeats: int) -> float:
        """Var(d_i) predicted at ``repeats`` per item (the between part floored at 0)."""
        k = check_positive_int(repeats, "repeats")
        return max(self.between_item_var, 0.0) + self.within_item_var / k


def variance_components(outcomes_b: Any, outcomes_c: Any, *,
                        paired_repeats: bool = True) -> VarianceComponents:
    """ANOVA estimates of sigma_b^2 and sigma_w^2 from a pilot of both arms.

    ``outcomes_b`` and ``outcomes_c`` are complete (n_items, k) outcome arrays, k >= 2, of
    the same items. To plan a comparison whose arms sample independently (a candidate that
    changes the sampler), pass the baseline and a candidate pilot, or the baseline and a
    rerun with other seeds; an A/A with paired seeds has within-item variance near 0 and
    plans for a candidate that reproduces the baseline's samples.
    """
    base = as_outcomes(outcomes_b, "outcomes_b")
    cand = as_outcomes(outcomes_c, "outcomes_c")
    if base.shape != cand.shape:
        raise ValueError(
            f"outcomes_b has shape {base.shape} but outcomes_c has {cand.shape}; both arms "
            "need the same items and the same repeats (k) per item."
        )
    n, k = base.shape
    if n < 2 or k < 2:
        raise ValueError(
            f"variance components need at least 2 items and 2 repeats per item; got {n} "
            f"items x {k} repeats."
        )
    diff = cand - base
    d = diff.mean(axis=1)
    total = float(d.var(ddof=1))
    if paired_repeats:
        within = float(((diff - d[:, None]) ** 2).sum()) / (n * (k - 1))
    else:
        within = float((base.var(axis=1, ddof=1) + cand.var(axis=1, ddof=1)).mean())
    return VarianceComponents(
        between_item_var=total - within / k, within_item_var=within,
        item_difference_var=total, mean_difference=float(d.mean()), n_items=int(n),
        repeats=int(k), paired_repeats=bool(paired_repeats))


@dataclass(frozen=True, slots=True)
class RepeatsPlan:
    """Items needed at one number of repeats per item."""

    repeats: int
    items: int
    """max(items_for_drop, items_for_noninferiority)."""
    items_for_drop: int
    items_for_noninferiority: int
    item_difference_var: float
    """sigma_b^2 + sigma_w^2 / k."""
    power_drop: float
    """Power of the drop test at ``items``."""
    power_noninferiority: float
    """Power of the non-inferiority test at ``items``."""
    samples_per_arm: int
    """items x repeats: what one arm generates."""
    feasible: bool | None
    """Whether ``items`` fits in ``available_items`` (None when that was not given)."""


def rate_test_power(n: int, effect: float, variance: float, alpha: float) -> float:
    """Power of the one-sided paired t-test of n per-item differences with variance
    ``variance`` when the true mean lies ``effect`` beyond the null value."""
    if variance == 0.0:
        return 1.0
    critical = stats.t.isf(alpha, n - 1)
    return float(stats.nct.sf(critical, n - 1, effect * math.sqrt(n / variance)))


def _items_needed(effect: float, variance: float, alpha: float, power: float) -> int:
    if variance == 0.0:
        return 2
    z = stats.norm.isf(alpha) + stats.norm.isf(1.0 - power)
    n = max(2, math.ceil(variance * (z / effect) ** 2))  # the normal answer, a lower bound
    while rate_test_power(n, effect, variance, alpha) < power:
        n += 1 if n < 64 else max(1, n // 64)
        if n > _MAX_ITEMS:
            raise ValueError(f"more than {_MAX_ITEMS} items would be needed; the effect "
                             f"{effect} is too small for the variance {variance}.")
    while n > 2 and rate_test_power(n - 1, effect, variance, alpha) >= power:
        n -= 1
    return n


def _check_variance(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number >= 0.0):
        raise ValueError(f"{name} must be a finite variance >= 0; got {value!r}.")
    return number


def _check_repeats(repeats: Sequence[int]) -> tuple[int, ...]:
    if isinstance(repeats, (str, bytes)) or not isinstance(repeats, Sequence) or not repeats:
        raise ValueError(f"repeats must be a non-empty list of integers >= 1; got {repeats!r}.")
    return tuple(check_positive_int(k, "each entry of repeats") for k in repeats)


def items_repeats_for_power(*, between_item_var: float, within_item_var: float, drop: float,
                            margin: float, alpha: float = 0.05, power: float = 0.8,
                            repeats: Sequence[int] = (1, 2, 4, 8, 16), true_delta: float = 0.0,
                            available_items: int | None = None) -> list[RepeatsPlan]:
    """For each k in ``repeats``, the items n at which the paired rate test detects a true
    drop of ``drop`` and shows non-inferiority at ``margin`` (true difference
    ``true_delta``) each with probability ``power``. The variances are sigma_b^2 and
    sigma_w^2 of :func:`variance_components`."""
    between = max(_check_variance(between_item_var, "between_item_var"), 0.0)
    within = _check_variance(within_item_var, "within_item_var")
    drop, margin = check_margin(drop, "drop"), check_margin(margin)
    alpha, power = check_alpha(alpha), check_power(power)
    if not -margin < float(true_delta) < 1.0:
        raise ValueError(f"true_delta must exceed -margin ({-margin}) for non-inferiority to be "
                         f"provable; got {true_delta!r}.")
    if available_items is not None:
        available_items = check_positive_int(available_items, "available_items")
    plans = []
    for k in _check_repeats(repeats):
        variance = between + within / k
        n_drop = _items_needed(drop, variance, alpha, power)
        n_ni = _items_needed(margin + float(true_delta), variance, alpha, power)
        n = max(n_drop, n_ni)
        plans.append(RepeatsPlan(
            repeats=k, items=n, items_for_drop=n_drop, items_for_noninferiority=n_ni,
            item_difference_var=variance,
            power_drop=rate_test_power(n, drop, variance, alpha),
            power_noninferiority=rate_test_power(n, margin + float(true_delta), variance, alpha),
            samples_per_arm=n * k,
            feasible=None if available_items is None else n <= available_items))
    return plans
