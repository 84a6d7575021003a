"""Control charts for a series of per-run paired deltas: EWMA and tabular CUSUM.

One run's paired test asks "is this candidate worse than its baseline?"; a control chart
over many runs asks "has the process moved?", and accumulates evidence of a small,
persistent shift that no single run's test can see.

* EWMA (Roberts 1959, Technometrics 1:239-250; Lucas & Saccucci 1990, Technometrics
  32:1-12): z_i = lam * x_i + (1 - lam) * z_{i-1}, z_0 = target, with the exact
  (time-varying) limits target +- L * sqrt(Var z_i). For one sigma,
  Var z_i = sigma^2 * lam / (2 - lam) * (1 - (1 - lam)^(2i)) (Montgomery 2009, sec. 9.2);
  with one sigma per point the same sum reads
  Var z_i = sum_j lam^2 (1 - lam)^(2(i - j)) sigma_j^2.
* Tabular CUSUM (Page 1954, Biometrika 41:100-115; Montgomery 2009, sec. 9.1) on the
  standardized values y_i = (x_i - target) / sigma_i:
  C+_i = max(0, y_i - k + C+_{i-1}), C-_i = max(0, -y_i - k + C-_{i-1}), C+_0 = C-_0 = 0,
  so k (reference value) and h (decision interval) are in units of sigma.

Sigma is either given (a noise floor: one number), given per point (each run's paired
delta has its own standard error), or, when None, estimated from the average moving range
of the values, MR / d2 with d2 = 2 / sqrt(pi) (Montgomery 2009, sec. 6.4).

``alternative`` states which shifts raise alarms, in the suite's convention for the
delta (candidate - baseline): 'less' (the default) alarms only on drops, 'greater' only on
rises, 'two-sided' on both. Both sides' statistics and limits are always reported.

Montgomery, D. C. (2009). Introduction to Statistical Quality Control, 6th ed. Wiley.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .validation import as_score_array, check_alternative

_D2_PAIRS = 2.0 / math.sqrt(math.pi)  # E[range of two N(0,1)] = 1.128 (Montgomery, App. VI)


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, slots=True, eq=False)
class EwmaChartResult:
    """EWMA chart of a series: the statistic per point, its exact limits, the alarms."""

    statistic: np.ndarray = field(repr=False)
    """z_i, the exponentially weighted moving average after point i (read-only)."""
    lower_limit: np.ndarray = field(repr=False)
    """target - L * sd(z_i) per point (read-only)."""
    upper_limit: np.ndarray = field(repr=False)
    """target + L * sd(z_i) per point (read-only)."""
    sigma: np.ndarray = field(repr=False)
    """The standard deviation of each point used for the limits (read-only)."""
    sigma_source: str
    """'given' (one number), 'per point' or 'moving range' (estimated from the values)."""
    target: float
    lam: float
    """Weight of the newest point, in (0, 1]."""
    L: float
    """Width of the limits in standard deviations of z_i."""
    alternative: str
    """'less' (alarms on drops), 'greater' (on rises) or 'two-sided'."""
    alarms: tuple[int, ...]
    """0-based indices of the points whose statistic lies beyond a limit on an alarmed side."""

    @property
    def first_alarm(self) -> int | None:
        """Index of the first alarm, or None when the chart never alarms."""
        return self.alarms[0] if self.alarms else None


@dataclass(frozen=True, slots=True, eq=False)
class CusumChartResult:
    """Tabular CUSUM of a series, in units of sigma, with its alarms."""

    upper: np.ndarray = field(repr=False)
    """C+_i: accumulated evidence of a rise above target (read-only)."""
    lower: np.ndarray = field(repr=False)
    """C-_i: accumulated evidence of a drop below target, >= 0 (read-only)."""
    standardized: np.ndarray = field(repr=False)
    """y_i = (x_i - target) / sigma_i (read-only)."""
    sigma: np.ndarray = field(repr=False)
    """The standard deviation of each point used to standardize (read-only)."""
    sigma_source: str
    target: float
    k: float
    """Reference value (allowance), in sigma: half the shift the chart is tuned to detect."""
    h: float
    """Decision interval, in sigma: an alarmed side's statistic above h is an alarm."""
    alternative: str
    alarms: tuple[int, ...]
    """0-based indices where an alarmed side's statistic exceeds h."""

    @property
    def first_alarm(self) -> int | None:
        """Index of the first alarm, or None when the chart never alarms."""
        return self.alarms[0] if self.alarms else None


def _positive_number(value: Any, name: str, *, upper: float | None = None,
                     inclusive_upper: bool = True) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    too_high = upper is not None and (number > upper if inclusive_upper else number >= upper)
    if not number > 0.0 or not math.isfinite(number) or too_high:
        bound = "" if upper is None else f" and at most {upper:g}"
        raise ValueError(f"{name} must be a number above 0{bound}; got {value!r}.")
    return number


def _sigmas(sigma: Any, values: np.ndarray) -> tuple[np.ndarray, str]:
    """Per-point sigmas and where they came from (see the module docstring)."""
    if sigma is None:
        if values.size < 2:
            raise ValueError("sigma is None, so it is estimated from the moving range, which "
                             "needs at least two values; pass sigma (a noise floor or per-point "
                             "standard errors) for a single value.")
        estimate = float(np.mean(np.abs(np.diff(values)))) / _D2_PAIRS
        if estimate == 0.0:
            raise ValueError("sigma is None and all values are equal, so the moving-range "
                             "estimate of sigma is 0; pass sigma explicitly.")
        return np.full(values.size, estimate), "moving range"
    array = np.asarray(sigma, dtype=np.float64) if not np.isscalar(sigma) else None
    if array is None or array.ndim == 0:
        return np.full(values.size, _positive_number(sigma, "sigma")), "given"
    if array.shape != values.shape:
        raise ValueError(f"sigma has {array.size} entries but values has {values.size}; pass "
                         "one standard error per point or a single number.")
    bad = ~(np.isfinite(array) & (array > 0))
    if bad.any():
        index = int(np.argmax(bad))
        raise ValueError(f"sigma must be positive and finite at every point; it is "
                         f"{array[index]!r} at index {index}.")
    return array.copy(), "per point"


def _alarm_indices(low_out: np.ndarray, high_out: np.ndarray, alternative: str) -> tuple[int, ...]:
    if alternative == "less":
        hit = low_out
    elif alternative == "greater":
        hit = high_out
    else:
        hit = low_out | high_out
    return tuple(int(i) for i in np.flatnonzero(hit))


def ewma_chart(values: Any, *, target: float = 0.0, sigma: Any = None, lam: float = 0.2,
               L: float = 2.7, alternative: str = "less") -> EwmaChartResult:
    """EWMA chart with exact limits (see the module docstring for the definitions).

    ``values`` are the per-run statistics in time order (e.g. paired deltas); ``sigma`` is
    a number, one standard error per point, or None (moving-range estimate). A point is an
    alarm when its z_i lies strictly beyond the limit on an alarmed side. Lucas & Saccucci
    (1990) tabulate the (lam, L) pairs that give a chosen in-control average run length.
    """
    x = as_score_array(values, "values")
    check_alternative(alternative)
    lam = _positive_number(lam, "lam", upper=1.0)
    L = _positive_number(L, "L")
    target = float(target)
    if not math.isfinite(target):
        raise ValueError(f"target must be a finite number; got {target!r}.")
    sigmas, source = _sigmas(sigma, x)
    from scipy import signal  # here: scipy.signal costs every run that only reads (compare) ~0.1 s

    statistic = signal.lfilter([lam], [1.0, -(1.0 - lam)], x, zi=[(1.0 - lam) * target])[0]
    variance = signal.lfilter([lam * lam], [1.0, -(1.0 - lam) ** 2], sigmas**2)
    half_width = L * np.sqrt(variance)
    lower, upper = target - half_width, target + half_width
    return EwmaChartResult(
        statistic=_readonly(statistic), lower_limit=_readonly(lower),
        upper_limit=_readonly(upper), sigma=_readonly(sigmas), sigma_source=source,
        target=target, lam=lam, L=L, alternative=alternative,
        alarms=_alarm_indices(statistic < lower, statistic > upper, alternative))


def _tabular(steps: np.ndarray) -> np.ndarray:
    """C_i = max(0, C_{i-1} + step_i), C_0 = 0 (the one-sided tabular CUSUM recursion)."""
    return np.fromiter(itertools.accumulate(steps, lambda c, s: max(0.0, c + s), initial=0.0),
                       dtype=np.float64, count=steps.size + 1)[1:]


def cusum_chart(values: Any, *, target: float = 0.0, sigma: Any = None, k: float = 0.5,
                h: float = 4.0, alternative: str = "less") -> CusumChartResult:
    """Tabular CUSUM on standardized values (see the module docstring).

    ``k`` and ``h`` are in units of sigma: k = 0.5 tunes the chart to a shift of one sigma,
    and with h = 4 (or 5) its two-sided in-control average run length is about 168 (465)
    points (Montgomery 2009, sec. 9.1). An alarmed side whose statistic exceeds h is an
    alarm; the statistics are not reset after an alarm.
    """
    x = as_score_array(values, "values")
    check_alternative(alternative)
    try:
        k = float(k)
    except (TypeError, ValueError):
        k = math.nan
    if not (k >= 0.0 and math.isfinite(k)):
        raise ValueError(f"k must be a finite number >= 0 (in units of sigma); got {k!r}.")
    h = _positive_number(h, "h")
    target = float(target)
    if not math.isfinite(target):
        raise ValueError(f"target must be a finite number; got {target!r}.")
    sigmas, source = _sigmas(sigma, x)
    y = (x - target) / sigmas
    upper, lower = _tabular(y - k), _tabular(-y - k)
    return CusumChartResult(
        upper=_readonly(upper), lower=_readonly(lower), standardized=_readonly(y),
        sigma=_readonly(sigmas), sigma_source=source, target=target, k=k, h=h,
        alternative=alternative, alarms=_alarm_indices(lower > h, upper > h, alternative))
