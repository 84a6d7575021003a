"""Per-item pass rates over k sampled repeats, and the paired test on their differences.

Under sampling an item has a pass *rate*, not a score: repeat r of item i is one draw.
The unit of the comparison stays the item: each arm's k outcomes at an item are averaged
first (Kuebler et al. 2026, arXiv 2602.10144, average reruns per item before the paired
test), and the test works on the n per-item rate differences d_i = rate_c(i) - rate_b(i).
Their mean is the accuracy difference, and averaging the repeats shrinks the within-item
part of Var(d_i) = between + within / k (see :mod:`.repeats_power`).

Two tests, both one-sided at ``alpha`` and each giving a drop p-value (H0: delta >= 0) and
a non-inferiority p-value (H0: delta <= -margin), as the binary gate does:

* ``method='sign_flip'``: the exact (or Monte Carlo) sign-flip permutation test on the
  d_i (:mod:`.sign_flip`). The drop test needs only that the two arms' samples at an item
  are exchangeable under "no change" (true for an A/A, with or without paired seeds);
  the non-inferiority test also assumes the d_i are symmetric about -margin.
* ``method='t'``: the paired t-test with the cluster-robust standard error, items as the
  clusters (Liang & Zeger 1986; Miller 2024, arXiv 2411.00640, sec. 2.2) and n - 1
  degrees of freedom. With every item at k repeats it equals statsmodels' OLS of the
  sample-level differences on a constant with ``cov_type='cluster'`` and groups = items,
  and the one-sample t-test of the d_i.

The interval is the two-sided 1 - 2 alpha interval whose bounds are the two one-sided
tests' (so "the lower bound is above -margin" and "non-inferiority is shown" agree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .intervals import ConfidenceInterval, interval_level
from .repeats_power import (
    RepeatsPlan,
    VarianceComponents,
    items_repeats_for_power,
    variance_components,
)
from .sign_flip import sign_flip_test
from .validation import as_outcomes, as_rng, check_alpha, check_margin, check_positive_int

__all__ = ["RateTestResult", "RepeatsPlan", "VarianceComponents", "item_rates",
           "items_repeats_for_power", "paired_rate_test", "variance_components"]

RATE_TEST_METHODS = ("sign_flip", "t")
ALL_DIFFERENCES_ZERO = (
    "every item's pass rate is the same in both arms: the data carry no evidence of a "
    "change in either direction"
)


def item_rates(outcomes: Any, name: str = "outcomes") -> np.ndarray:
    """Per-item mean over the available repeats.

    ``outcomes`` has shape (n_items, k): 0/1 outcomes or scores in [0, 1], NaN for a
    missing sample. Raises ValueError for another shape, a value outside [0, 1] or an
    item with no sample at all.
    """
    values = as_outcomes(outcomes, name, allow_missing=True)
    return np.nanmean(values, axis=1)


@dataclass(frozen=True, slots=True)
class RateTestResult:
    """Paired test of per-item pass rates, candidate - baseline."""

    statistic: float
    """The non-inferiority test's statistic: mean(d) + margin for 'sign_flip', the t
    statistic (mean(d) + margin) / SE for 't' (+-inf when SE is 0)."""
    pvalue: float
    """Non-inferiority: H0 delta <= -margin against H1 delta > -margin."""
    pvalue_drop: float
    """Regression: H0 delta >= 0 against H1 delta < 0."""
    delta: float
    """Mean of the per-item rate differences (candidate - baseline)."""
    standard_error: float
    """Cluster-robust SE of delta (items as clusters): sd(d_i) / sqrt(n)."""
    ci_low: float
    ci_high: float
    confidence_level: float
    """1 - 2 alpha: each bound is a one-sided test at alpha."""
    mde: float
    """Drop detectable with 80% power by a one-sided test at alpha, from the SE
    (t quantiles with n - 1 degrees of freedom); NaN when the SE is 0 (no item's rate
    difference varies, so the data say nothing about the spread)."""
    margin: float
    alpha: float
    n_items: int
    repeats: int
    """k, the repeats per item and arm (columns of the outcome arrays)."""
    missing: int
    """Samples missing (NaN) in either arm; their items' rates use the samples present."""
    method: str
    """'sign_flip' or 't'."""
    exact: bool
    """Sign flips enumerated exactly (the t-test is always False)."""
    n_resamples: int
    """Sign vectors used (0 for the t-test)."""
    degenerate: str | None = None

    @property
    def pvalue_noninferiority(self) -> float:
        """The same as ``pvalue``, under the gate's name for it."""
        return self.pvalue

    @property
    def pvalue_regression(self) -> float:
        """The same as ``pvalue_drop``, under the gate's name for it."""
        return self.pvalue_drop

    def confidence_interval(self) -> ConfidenceInterval:
        """The 1 - 2 alpha interval of delta (both bounds clipped to [-1, 1])."""
        return ConfidenceInterval(self.ci_low, self.ci_high)


POWER_FOR_MDE = 0.8


def _check_method(method: str) -> str:
    if method not in RATE_TEST_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(map(repr, RATE_TEST_METHODS))}; got {method!r}."
        )
    return method


def _rate_differences(baseline: Any, candidate: Any) -> tuple[np.ndarray, int, int]:
    base = as_outcomes(baseline, "baseline", allow_missing=True)
    cand = as_outcomes(candidate, "candidate", allow_missing=True)
    if base.shape[0] != cand.shape[0]:
        raise ValueError(
            f"baseline has {base.shape[0]} items but candidate has {cand.shape[0]}; paired "
            "statistics need the same items in the same order in both arms."
        )
    if base.shape[1] != cand.shape[1]:
        raise ValueError(
            f"baseline has {base.shape[1]} repeats per item but candidate has "
            f"{cand.shape[1]}; both arms need the same repeats (k) per item."
        )
    if base.shape[0] < 2:
        raise ValueError("a paired rate test needs at least two items; got 1.")
    missing = int(np.isnan(base).sum() + np.isnan(cand).sum())
    diff = np.nanmean(cand, axis=1) - np.nanmean(base, axis=1)
    return diff, int(base.shape[1]), missing


def paired_rate_test(baseline: Any, candidate: Any, *, margin: float, alpha: float = 0.05,
                     method: str = "sign_flip", n_resamples: int = 9999,
                     seed: int | np.random.Generator = 0) -> RateTestResult:
    """Drop and non-inferiority tests of the per-item pass-rate differences.

    ``baseline`` and ``candidate`` are (n_items, k) outcome arrays (see :func:`item_rates`)
    of the same items in the same order. ``method`` is 'sign_flip' (exact enumeration when
    2^n <= n_resamples, else ``n_resamples`` Monte Carlo sign vectors drawn from
    ``seed``) or 't' (cluster-robust paired t-test). See the module docstring for what each
    assumes.
    """
    margin, alpha = check_margin(margin), check_alpha(alpha)
    _check_method(method)
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    d, k, missing = _rate_differences(baseline, candidate)
    n = d.size
    delta = float(d.mean())
    se = float(d.std(ddof=1)) / math.sqrt(n)
    mde = float((stats.t.isf(alpha, n - 1) + stats.t.isf(1 - POWER_FOR_MDE, n - 1)) * se) \
        if se > 0 else math.nan
    degenerate = ALL_DIFFERENCES_ZERO if not d.any() else None
    common = dict(delta=delta, standard_error=se, confidence_level=interval_level(alpha), mde=mde,
                  margin=margin, alpha=alpha, n_items=int(n), repeats=k, missing=missing,
                  method=method, degenerate=degenerate)
    if method == "t":
        if se == 0.0:
            p_ni = 0.0 if delta > -margin else 1.0
            p_drop = 1.0 if delta >= 0 else 0.0
            statistic, half = math.copysign(math.inf, delta + margin), 0.0
        else:
            statistic = (delta + margin) / se
            p_ni = float(stats.t.sf(statistic, n - 1))
            p_drop = float(stats.t.cdf(delta / se, n - 1))
            half = float(stats.t.isf(alpha, n - 1)) * se
        return RateTestResult(
            statistic=statistic, pvalue=p_ni, pvalue_drop=p_drop,
            ci_low=max(-1.0, delta - half), ci_high=min(1.0, delta + half),
            exact=False, n_resamples=0, **common)
    rng = as_rng(seed)
    flips = sign_flip_test(d, mu_greater=-margin, alpha=alpha, n_resamples=n_resamples,
                           rng=rng, bounds=(-1.0, 1.0))
    return RateTestResult(
        statistic=delta + margin, pvalue=flips.pvalue_greater, pvalue_drop=flips.pvalue_less,
        ci_low=flips.ci_low, ci_high=flips.ci_high, exact=flips.exact,
        n_resamples=flips.n_resamples, **common)
