"""Power and sample-size planning, checked by hand and by simulation."""

from __future__ import annotations

from math import comb, sqrt

import numpy as np
import pytest
from scipy import stats

from evals.stats import (
    items_needed_for_drop,
    items_needed_for_noninferiority,
    mcnemar_exact,
    mcnemar_power,
    mde_paired,
    noninferiority_power,
)

Z_95, Z_80 = 1.6448536269514722, 0.8416212335729143  # one-sided 5%, 80% power


def test_connor_sample_size_by_hand():
    # Connor (1987): n = (z_a sqrt(psi) + z_b sqrt(psi - delta^2))^2 / delta^2.
    psi, delta = 0.10, 0.02
    n = (Z_95 * sqrt(psi) + Z_80 * sqrt(psi - delta**2)) ** 2 / delta**2
    assert n == pytest.approx(1543.6, abs=0.1)
    assert items_needed_for_drop(delta, psi, 0.05, 0.8) == 1544


def test_power_mde_and_items_needed_are_consistent():
    n = items_needed_for_drop(0.03, 0.2, 0.05, 0.9)
    assert mcnemar_power(n, 0.03, 0.2) >= 0.9 > mcnemar_power(n - 1, 0.03, 0.2)
    mde = mde_paired(1000, 0.2, 0.05, 0.8)
    assert mcnemar_power(1000, mde, 0.2) == pytest.approx(0.8, abs=1e-9)
    assert mde_paired(4000, 0.2) < mde  # more items, smaller detectable drop
    two_sided = items_needed_for_drop(0.03, 0.2, two_sided=True)
    assert two_sided > items_needed_for_drop(0.03, 0.2)


def brute_force_exact_power(n, drop, psi, alpha):
    """Sum over every (correct->wrong, wrong->correct) count of the exact gate's rejection."""
    p_loss, p_gain = (psi + drop) / 2, (psi - drop) / 2
    total = 0.0
    for loss in range(n + 1):
        for gain in range(n + 1 - loss):
            m = loss + gain
            if m == 0 or sum(comb(m, j) for j in range(loss, m + 1)) / 2**m > alpha:
                continue
            total += (
                comb(n, loss)
                * comb(n - loss, gain)
                * p_loss**loss
                * p_gain**gain
                * (1 - psi) ** (n - m)
            )
    return total


@pytest.mark.parametrize("n, drop, psi", [(40, 0.1, 0.3), (60, 0.05, 0.25)])
def test_exact_power_matches_enumeration(n, drop, psi):
    assert mcnemar_power(n, drop, psi, method="exact") == pytest.approx(
        brute_force_exact_power(n, drop, psi, 0.05), rel=1e-7
    )


def _detection_rate(simulate, seed, reps, n, drop, psi):
    rng = np.random.default_rng(seed)
    baseline, candidate = simulate(
        rng, reps, n, p_loss=(psi + drop) / 2, p_gain=(psi - drop) / 2, accuracy=0.7
    )
    return float(
        np.mean(
            [mcnemar_exact(b, c).pvalue <= 0.05 for b, c in zip(baseline, candidate, strict=True)]
        )
    )


def test_detection_rate_matches_exact_power_at_n1000(simulate):
    """n = 1000, 10% discordance, 2-point drop. The exact gate's planned power (0.603)
    matches simulation; Connor's normal approximation (0.639) overstates it by ~3.6
    points here because the exact conditional test is conservative."""
    reps, n, drop, psi = 4000, 1000, 0.02, 0.10
    rate = _detection_rate(simulate, 21, reps, n, drop, psi)
    exact = mcnemar_power(n, drop, psi, method="exact")
    assert abs(rate - exact) <= min(0.03, 3 * sqrt(exact * (1 - exact) / reps))
    assert mcnemar_power(n, drop, psi) - exact == pytest.approx(0.036, abs=0.002)


def test_detection_rate_matches_connor_where_the_normal_approximation_holds(simulate):
    """n = 2000, 30% discordance (about 600 discordant pairs), 3-point drop."""
    reps, n, drop, psi = 3000, 2000, 0.03, 0.30
    rate = _detection_rate(simulate, 22, reps, n, drop, psi)
    assert abs(rate - mcnemar_power(n, drop, psi)) <= 0.03


def test_noninferiority_sample_size_by_hand():
    """Nam (1997) with delta = 0, psi = 0.10, margin = 0.02: the limit of Tango's
    restricted estimate solves 2q^2 - 0.14 q + 0.00102 = 0."""
    q = (0.14 + sqrt(0.14**2 - 8 * 0.00102)) / 4
    null_spread, true_spread = sqrt(2 * q - 0.02 - 0.02**2), sqrt(0.10)
    n = ((Z_95 * null_spread + Z_80 * true_spread) / 0.02) ** 2
    assert items_needed_for_noninferiority(0.02, 0.10, 0.05, 0.8) == int(np.ceil(n)) == 1578
    assert noninferiority_power(1578, 0.02, 0.10) == pytest.approx(0.8, abs=0.002)
    # A candidate that is truly better needs fewer items.
    assert items_needed_for_noninferiority(0.02, 0.10, true_delta=0.01) < 1578


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: items_needed_for_drop(0.2, 0.1), "needs at least that much discordance"),
        (lambda: mde_paired(10, 0.1), "too few"),
        (lambda: mcnemar_power(100, 0.02, 0.1, method="bayes"), "method must be one of"),
        (lambda: mcnemar_power(0, 0.02, 0.1), "n must be an integer"),
        (lambda: items_needed_for_noninferiority(0.02, 0.1, true_delta=-0.03), "exceed -margin"),
        (lambda: items_needed_for_noninferiority(0.02, 0.01, true_delta=0.05), "cannot exceed"),
        (lambda: items_needed_for_drop(0.02, 0.1, power=1.0), "power"),
    ],
)
def test_planning_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_normal_power_formula_value():
    z = (0.02 * sqrt(1000) - Z_95 * sqrt(0.1)) / sqrt(0.1 - 0.02**2)
    assert mcnemar_power(1000, 0.02, 0.1) == pytest.approx(stats.norm.cdf(z), rel=1e-9)
