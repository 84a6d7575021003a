"""Planning: power, minimum detectable drop and items needed for the paired design.

Regression gate (McNemar): Connor (1987), "Sample size for testing differences in
proportions for the paired-sample design", Biometrics 43:207-211. With discordance
psi = P(item changes correctness) and accuracy drop delta, a one-sided level-alpha
test has approximate power

    Phi((delta * sqrt(n) - z_alpha * sqrt(psi)) / sqrt(psi - delta^2)),

equivalently n = (z_alpha sqrt(psi) + z_beta sqrt(psi - delta^2))^2 / delta^2.
This normal approximation describes the asymptotic McNemar test. The exact
conditional test used by the gate is conservative and has lower power: about
3 to 4 points less at n = 1000, psi = 0.10. ``method='exact'`` computes the exact
test's power by summing over the binomial distribution of discordant pairs.

Non-inferiority (Tango's score test): the approximate sample size of Nam (1997),
"Establishing equivalence of two treatments and sample size requirements in
matched-pairs design", Biometrics 53:1422-1430 (the formula evaluated by Liu,
Hsueh, Hsieh & Chen 2002, Statistics in Medicine 21:231-245):

    n = (z_alpha * w0 + z_beta * w)^2 / (delta + margin)^2,

with w^2 = psi - delta^2 at the true difference delta and w0^2 = 2 q0 - margin
- margin^2, where q0 is the large-sample limit of Tango's restricted estimate of
P(correct -> wrong) under delta = -margin.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from .tango import _restricted_q
from .validation import (
    check_alpha,
    check_margin,
    check_positive_int,
    check_power,
    check_probability,
)

POWER_METHODS = ("normal", "exact")


def _z_alpha(alpha: float, two_sided: bool) -> float:
    return float(stats.norm.isf(alpha / 2.0 if two_sided else alpha))


def _check_drop(drop: float, discordance: float, *, allow_total: bool = False
                ) -> tuple[float, float]:
    """`allow_total`: the exact test also takes a drop and a discordance of 1 (every item
    flips correct -> wrong), the shape of a total regression."""
    if allow_total and drop == 1.0 and discordance == 1.0:
        return 1.0, 1.0
    drop = check_margin(drop, "drop")
    discordance = 1.0 if allow_total and discordance == 1.0 else \
        check_probability(discordance, "discordance")
    if drop > discordance:
        raise ValueError(
            f"a drop of {drop} needs at least that much discordance (share of items that "
            f"change correctness), but discordance is {discordance}; raise discordance or "
            "lower the drop."
        )
    return drop, discordance


def _exact_power(n: int, drop: float, discordance: float, alpha: float, two_sided: bool) -> float:
    """Power of the exact conditional McNemar test, summed over the discordant count."""
    lo, hi = stats.binom.ppf([1e-13, 1.0 - 1e-13], n, discordance).astype(int)
    m = np.arange(max(lo, 1), hi + 1)
    weight = stats.binom.pmf(m, n, discordance)
    p_regress = (discordance + drop) / (2.0 * discordance)  # P(correct -> wrong | changed)
    level = alpha / 2.0 if two_sided else alpha
    # Reject when the correct->wrong count B exceeds k, the smallest k with P(B > k) <= level.
    k = stats.binom.isf(level, m, 0.5)
    reject = stats.binom.sf(k, m, p_regress)
    if two_sided:
        k_low = stats.binom.ppf(level, m, 0.5)  # P(B <= k_low) may exceed level: step down
        k_low = np.where(stats.binom.cdf(k_low, m, 0.5) > level, k_low - 1, k_low)
        reject = reject + stats.binom.cdf(k_low, m, p_regress)
    return float(np.sum(weight * reject))


def mcnemar_power(
    n: int,
    drop: float,
    discordance: float,
    alpha: float = 0.05,
    *,
    method: str = "normal",
    two_sided: bool = False,
) -> float:
    """Probability that the McNemar gate flags an accuracy ``drop`` with ``n`` items.

    ``method='normal'`` is Connor's (1987) approximation; ``method='exact'`` sums the
    exact conditional test's rejection probability over the number of discordant pairs.
    The test is one-sided (the regression direction) unless ``two_sided``.
    """
    n = check_positive_int(n, "n")
    drop, discordance = _check_drop(drop, discordance, allow_total=method == "exact")
    alpha = check_alpha(alpha)
    if _check_method(method) == "exact":
        return _exact_power(n, drop, discordance, alpha, two_sided)
    spread = math.sqrt(discordance - drop**2)
    z = (drop * math.sqrt(n) - _z_alpha(alpha, two_sided) * math.sqrt(discordance)) / spread
    return float(stats.norm.cdf(z))


def _check_method(method: str) -> str:
    if method not in POWER_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(map(repr, POWER_METHODS))}; got {method!r}."
        )
    return method


def items_needed_for_drop(
    drop: float,
    discordance: float,
    alpha: float = 0.05,
    power: float = 0.8,
    *,
    two_sided: bool = False,
    method: str = "normal",
) -> int:
    """Items needed for the McNemar gate to flag ``drop`` with the given power.

    ``method='normal'``: Connor's (1987) closed form. ``method='exact'``: the smallest n
    from which on the exact conditional test reaches the power (its power is a sawtooth in
    n, so the search starts at Connor's n and walks to the first n whose power and that of
    the next 20 sizes all reach it). ``discordance`` is the expected share of items that
    change correctness between the engines, e.g. from an A/A rerun plus the expected flips.
    """
    drop, discordance = _check_drop(drop, discordance)
    alpha, power = check_alpha(alpha), check_power(power)
    _check_method(method)
    z_a, z_b = _z_alpha(alpha, two_sided), float(stats.norm.isf(1.0 - power))
    root = z_a * math.sqrt(discordance) + z_b * math.sqrt(discordance - drop**2)
    n = max(1, math.ceil((root / drop) ** 2))
    if method == "normal":
        return n

    def reaches(m: int) -> bool:
        return _exact_power(m, drop, discordance, alpha, two_sided) >= power

    while n > 1 and reaches(n - 1):  # Connor overshoots rarely; step back while it holds
        n -= 1
    while not all(reaches(m) for m in range(n, n + 21)):
        n += 1
    return n


def mde_paired(
    n: int,
    discordance: float,
    alpha: float = 0.05,
    power: float = 0.8,
    *,
    two_sided: bool = False,
    method: str = "normal",
) -> float:
    """Minimum detectable accuracy drop for ``n`` paired items.

    ``method='normal'``: Connor (1987) solved for delta. ``method='exact'``: the smallest
    drop at which the exact conditional McNemar test reaches ``power`` (bisection on its
    power, which grows with the drop at fixed discordance); a discordance of 1 is allowed.
    Raises ValueError when even a drop equal to the discordance (every changed item
    getting worse) would not reach the requested power.
    """
    n = check_positive_int(n, "n")
    alpha, power = check_alpha(alpha), check_power(power)
    if _check_method(method) == "exact":
        discordance = 1.0 if discordance == 1.0 else check_probability(discordance,
                                                                       "discordance")
        if _exact_power(n, discordance, discordance, alpha, two_sided) < power:
            raise ValueError(
                f"{n} items are too few to reach power {power} at discordance {discordance}: "
                "even a drop equal to the discordance is not detectable; add items."
            )
        low, high = 0.0, discordance
        if discordance < 1.0:  # Connor's drop brackets the exact one closely: fewer steps
            try:
                guess = mde_paired(n, discordance, alpha, power, two_sided=two_sided)
            except ValueError:
                guess = discordance
            if _exact_power(n, min(1.25 * guess, discordance), discordance, alpha,
                            two_sided) >= power:
                high = min(1.25 * guess, discordance)
            if _exact_power(n, 0.9 * guess, discordance, alpha, two_sided) < power:
                low = 0.9 * guess
        while high - low > 1e-6:
            mid = (low + high) / 2.0
            if _exact_power(n, mid, discordance, alpha, two_sided) >= power:
                high = mid
            else:
                low = mid
        return float(high)
    discordance = check_probability(discordance, "discordance")
    z_a, z_b = _z_alpha(alpha, two_sided), float(stats.norm.isf(1.0 - power))

    def excess(delta: float) -> float:
        return (
            delta * math.sqrt(n)
            - z_a * math.sqrt(discordance)
            - z_b * math.sqrt(max(discordance - delta**2, 0.0))
        )

    if excess(discordance) < 0:
        raise ValueError(
            f"{n} items are too few to reach power {power} at discordance {discordance}: even "
            "a drop equal to the discordance is not detectable; add items."
        )
    if excess(1e-12) >= 0:
        return 0.0  # only possible when power <= alpha
    return float(optimize.brentq(excess, 1e-12, discordance, xtol=1e-14))


def _noninferiority_spreads(
    margin: float, discordance: float, true_delta: float
) -> tuple[float, float]:
    if not -margin < true_delta < 1.0:
        raise ValueError(
            f"true_delta must exceed -margin ({-margin}) for non-inferiority to be provable; "
            f"got {true_delta}."
        )
    if abs(true_delta) > discordance:
        raise ValueError(
            f"|true_delta| ({abs(true_delta)}) cannot exceed the discordance ({discordance})."
        )
    p_gain = (discordance + true_delta) / 2.0  # P(wrong -> correct)
    p_loss = (discordance - true_delta) / 2.0  # P(correct -> wrong)
    q0 = _restricted_q(p_gain, p_loss, 1, -margin)
    null_spread = math.sqrt(2.0 * q0 - margin - margin**2)
    true_spread = math.sqrt(discordance - true_delta**2)
    return null_spread, true_spread


def items_needed_for_noninferiority(
    margin: float,
    discordance: float,
    alpha: float = 0.05,
    power: float = 0.8,
    true_delta: float = 0.0,
) -> int:
    """Items needed for Tango's test to show non-inferiority within ``margin`` (Nam 1997).

    ``true_delta`` is the accuracy difference assumed true (0 = no change).
    """
    margin = check_margin(margin)
    discordance = check_probability(discordance, "discordance")
    alpha, power = check_alpha(alpha), check_power(power)
    null_spread, true_spread = _noninferiority_spreads(margin, discordance, float(true_delta))
    z_a, z_b = float(stats.norm.isf(alpha)), float(stats.norm.isf(1.0 - power))
    n = ((z_a * null_spread + z_b * true_spread) / (true_delta + margin)) ** 2
    return max(1, math.ceil(n))


def noninferiority_power(
    n: int, margin: float, discordance: float, alpha: float = 0.05, true_delta: float = 0.0
) -> float:
    """Approximate power of Tango's non-inferiority test with ``n`` items (Nam 1997)."""
    n = check_positive_int(n, "n")
    margin = check_margin(margin)
    discordance = check_probability(discordance, "discordance")
    alpha = check_alpha(alpha)
    null_spread, true_spread = _noninferiority_spreads(margin, discordance, float(true_delta))
    z = (
        (true_delta + margin) * math.sqrt(n) - float(stats.norm.isf(alpha)) * null_spread
    ) / true_spread
    return float(stats.norm.cdf(z))
