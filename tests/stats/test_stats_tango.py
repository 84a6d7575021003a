"""Tango's score interval and non-inferiority test.

Tango's (1998) own worked example could not be found in the reference material
available while writing these tests. The published reference used instead is the
Cavo et al. (2012) table analysed with Tango's interval in Fagerland, Lydersen &
Laake (2017), *Statistical Analysis of Contingency Tables*, ch. 8, as printed by
the book's R package ``contingencytables``: estimate -0.0621, 95% CI -0.1240 to
-0.0054. All other checks compare with an independent brute-force reference: the
restricted maximum-likelihood estimate is found by bisection on the profile score
equation of the multinomial likelihood (not Tango's closed-form quadratic), and the
interval ends by bisection on the resulting score statistic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evals.stats import (
    flip_counts,
    tango_noninferiority,
    tango_noninferiority_from_counts,
    tango_score_interval,
)


def _bisect(f, lo: float, hi: float, iterations: int = 200) -> float:
    """Root of a function that is positive at lo and negative at hi."""
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def reference_restricted_q(gain: int, loss: int, n: int, delta0: float) -> float:
    """argmax over q = P(loss) of gain*log(q + delta0) + loss*log(q) + rest*log(1 - 2q - delta0)."""
    rest = n - gain - loss
    lo, hi = max(0.0, -delta0), (1.0 - delta0) / 2.0

    def score(q: float) -> float:
        return gain / (q + delta0) + loss / q - 2.0 * rest / (1.0 - 2.0 * q - delta0)

    width = hi - lo
    return _bisect(score, lo + 1e-300 + width * 1e-17, hi - width * 1e-17)


def reference_z(gain: int, loss: int, n: int, delta0: float) -> float:
    q = reference_restricted_q(gain, loss, n, delta0)
    return (gain - loss - n * delta0) / math.sqrt(n * (2 * q + delta0 * (1 - delta0)))


def reference_interval(gain: int, loss: int, n: int, level: float) -> tuple[float, float]:
    z = stats.norm.ppf(0.5 + level / 2)
    estimate = (gain - loss) / n
    low = _bisect(lambda d: reference_z(gain, loss, n, d) - z, -1 + 1e-9, estimate)
    high = _bisect(lambda d: reference_z(gain, loss, n, d) + z, estimate, 1 - 1e-9)
    return low, high


def test_published_example_cavo_2012():
    low, high = tango_score_interval(wrong_to_correct=6, correct_to_wrong=16, n=161)
    assert low == pytest.approx(-0.1240, abs=5e-5)
    assert high == pytest.approx(-0.0054, abs=5e-5)


CASES = [(6, 16, 161), (1, 7, 21), (40, 20, 160), (13, 29, 400), (120, 180, 50_000), (3, 1, 10)]


@pytest.mark.parametrize("gain, loss, n", CASES)
@pytest.mark.parametrize("level", [0.95, 0.9])
def test_interval_matches_brute_force(gain, loss, n, level):
    low, high = tango_score_interval(gain, loss, n, level)
    ref_low, ref_high = reference_interval(gain, loss, n, level)
    assert low == pytest.approx(ref_low, rel=1e-9)
    assert high == pytest.approx(ref_high, rel=1e-9)


@pytest.mark.parametrize("gain, loss, n", CASES)
@pytest.mark.parametrize("margin", [0.01, 0.05])
def test_noninferiority_pvalue_matches_brute_force(make_pairs, gain, loss, n, margin):
    if n > 5000:
        counts = flip_counts(*make_pairs(n - gain - loss, loss, gain, 0))
        result = tango_noninferiority_from_counts(counts, margin)
    else:
        result = tango_noninferiority(*make_pairs(n - gain - loss, loss, gain, 0), margin=margin)
    reference = reference_z(gain, loss, n, -margin)
    assert result.statistic == pytest.approx(reference, rel=1e-9)
    assert result.pvalue == pytest.approx(stats.norm.sf(reference), rel=1e-9)
    assert result.delta == pytest.approx((gain - loss) / n, rel=1e-12)


def test_pvalue_agrees_with_interval_lower_limit(make_pairs):
    base, cand = make_pairs(300, 25, 18, 57)
    alpha = 0.05
    lower = tango_noninferiority(base, cand, margin=0.5).confidence_interval(1 - 2 * alpha).low
    just_inside = tango_noninferiority(base, cand, margin=-lower + 1e-6, alpha=alpha)
    just_outside = tango_noninferiority(base, cand, margin=-lower - 1e-6, alpha=alpha)
    assert just_inside.noninferior and just_inside.pvalue < alpha
    assert not just_outside.noninferior and just_outside.pvalue > alpha


def test_no_discordant_pairs_gives_finite_results(make_pairs):
    result = tango_noninferiority(*make_pairs(30, 0, 0, 10), margin=0.05)
    assert math.isfinite(result.statistic) and 0.0 < result.pvalue < 1.0
    low, high = result.confidence_interval()
    assert low < 0.0 < high and low == pytest.approx(-high, rel=1e-9)
    # Closed form when nothing flips: Z(-m) = sqrt(n m / (1 - m)).
    assert result.statistic == pytest.approx(math.sqrt(40 * 0.05 / 0.95), rel=1e-12)


def test_extreme_tables_reach_the_boundary():
    assert tango_score_interval(0, 10, 10).low == -1.0
    assert tango_score_interval(10, 0, 10).high == 1.0
    low, high = tango_score_interval(0, 1, 1)
    assert (low, high < 1.0) == (-1.0, True)


def test_single_item(make_pairs):
    result = tango_noninferiority([1.0], [0.0], margin=0.1)
    assert result.n == 1 and result.correct_to_wrong == 1
    assert math.isfinite(result.statistic)


@pytest.mark.parametrize("margin", [0, -0.02, 1.5, float("nan"), "x"])
def test_margin_must_be_positive_accuracy_units(make_pairs, margin):
    with pytest.raises(ValueError, match="margin must be a positive accuracy difference"):
        tango_noninferiority(*make_pairs(3, 1, 1, 1), margin=margin)


def test_bad_counts_and_levels():
    with pytest.raises(ValueError, match="counts must satisfy"):
        tango_score_interval(5, 6, 10)
    with pytest.raises(ValueError, match="confidence_level"):
        tango_score_interval(1, 1, 10, confidence_level=95)


def test_noninferiority_power_matches_nam_planner():
    """Tango's test at the Nam (1997) sample size reaches the planned power (+-3 points)."""
    from evals.stats import items_needed_for_noninferiority, noninferiority_power

    margin, discordance, alpha = 0.03, 0.12, 0.05
    n = items_needed_for_noninferiority(margin, discordance, alpha, power=0.8)
    rng = np.random.default_rng(11)
    reps = 3000
    cells = rng.multinomial(n, [discordance / 2, discordance / 2, 1 - discordance], size=reps)
    shown = []
    for loss, gain, same in cells:
        counts = flip_counts(*pairs_counts(int(loss), int(gain), int(same)))
        shown.append(tango_noninferiority_from_counts(counts, margin, alpha).noninferior)
    rate = float(np.mean(shown))
    planned = noninferiority_power(n, margin, discordance, alpha)
    assert abs(rate - planned) <= 0.03
    assert planned == pytest.approx(0.8, abs=0.01)


def pairs_counts(loss: int, gain: int, same: int):
    return (
        np.r_[np.ones(loss), np.zeros(gain), np.ones(same)],
        np.r_[np.zeros(loss), np.ones(gain), np.ones(same)],
    )
