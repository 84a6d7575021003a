"""Anytime-valid sequential stopping."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from evals.stats import sequential_decision
from evals.stats.sequential import noninferiority_log_capital, regression_log_evalue


@pytest.mark.parametrize(
    "x, k, prior", [(0, 0, (1, 1)), (7, 10, (1, 1)), (3, 12, (2, 5)), (40, 50, (0.5, 0.5))]
)
def test_regression_evalue_matches_numerical_integration(x, k, prior):
    a, b = prior

    def density(p):
        return p ** (a - 1) * (1 - p) ** (b - 1)

    mixture = integrate.quad(
        lambda p: (2 * p) ** x * (2 * (1 - p)) ** (k - x) * density(p),
        0.5,
        1,
        epsabs=0,
        epsrel=1e-13,
    )[0]
    normaliser = integrate.quad(density, 0.5, 1, epsabs=0, epsrel=1e-13)[0]
    assert float(regression_log_evalue(x, k, prior)) == pytest.approx(
        math.log(mixture / normaliser), rel=1e-9, abs=1e-12
    )


def test_noninferiority_capital_matches_a_plain_loop():
    rng = np.random.default_rng(0)
    d = rng.choice([-1.0, 0.0, 1.0], p=[0.06, 0.9, 0.04], size=300)
    margin = 0.03
    log_capital, total, total_sq = 0.0, 0.0, 0.0
    expected = []
    for t, value in enumerate(d):
        mean = total / (t + 1)
        variance = (0.25 + total_sq) / (t + 1) - mean**2
        bet = min(max((mean + margin) / (variance + (mean + margin) ** 2), 0.0), 0.5 / (1 - margin))
        log_capital += math.log(1 + bet * (value + margin))
        expected.append(log_capital)
        total += value
        total_sq += value**2
    np.testing.assert_allclose(
        noninferiority_log_capital(d, margin), expected, rtol=1e-9, atol=1e-12
    )


def _decisions(simulate, seed, reps, p_loss, p_gain, margin=0.02, n=2000):
    rng = np.random.default_rng(seed)
    baseline, candidate = simulate(rng, reps, n, p_loss=p_loss, p_gain=p_gain, accuracy=0.6)
    results = [
        sequential_decision(b, c, looks=50, margin=margin)
        for b, c in zip(baseline, candidate, strict=True)
    ]
    decisions = np.array([r.decision for r in results])
    return decisions, np.array([r.items_used for r in results])


def test_false_regression_rate_under_no_difference(simulate):
    reps, alpha = 2000, 0.05
    decisions, _ = _decisions(simulate, 1, reps, p_loss=0.05, p_gain=0.05)
    assert np.mean(decisions == "regression") <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)


def test_false_noninferiority_rate_at_the_margin(simulate):
    """True delta = -margin exactly: declaring non-inferiority is an error."""
    reps, alpha = 2000, 0.05
    decisions, _ = _decisions(simulate, 2, reps, p_loss=0.06, p_gain=0.04, margin=0.02)
    assert np.mean(decisions == "non_inferior") <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)


def test_planted_twenty_point_drop_stops_early(simulate):
    decisions, used = _decisions(simulate, 3, 300, p_loss=0.25, p_gain=0.05)
    assert (decisions == "regression").all()
    assert used.mean() * 5 <= 2000


def test_equal_engines_can_show_noninferiority(simulate):
    decisions, used = _decisions(simulate, 4, 200, p_loss=0.02, p_gain=0.02, margin=0.03)
    assert np.mean(decisions == "non_inferior") > 0.8 and used.mean() < 2000


def test_result_structure_and_looks(make_pairs):
    base, cand = make_pairs(60, 2, 2, 36, rng=np.random.default_rng(5))
    result = sequential_decision(base, cand, looks=30, margin=0.02)
    assert result.decision == "continue" and result.items_used == 100 == result.n_items
    assert [look.items for look in result.looks] == [30, 60, 90, 100]
    assert result.threshold == pytest.approx(math.log(20))
    last = result.looks[-1]
    assert (last.correct_to_wrong, last.wrong_to_correct, last.delta) == (2, 2, 0.0)
    explicit = sequential_decision(base, cand, looks=[30, 60, 90, 100], margin=0.02)
    assert explicit.looks == result.looks


def test_stopping_look_is_the_last_reported(make_pairs):
    base, cand = make_pairs(0, 40, 0, 60)  # every early item is a loss
    result = sequential_decision(base, cand, looks=[5, 10, 20, 100], margin=0.05)
    assert result.decision == "regression" and result.items_used == result.looks[-1].items == 10


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"looks": [10, 5]}, "strictly increasing"),
        ({"looks": [5, 500]}, "between 1 and 100"),
        ({"looks": 0}, "looks must be an integer >= 1"),
        ({"looks": 10, "margin": 0}, "margin"),
        ({"looks": 10, "alpha": 1.5}, "alpha"),
        ({"looks": 10, "prior": (0, 1)}, "prior"),
    ],
)
def test_bad_arguments(make_pairs, kwargs, message):
    kwargs = {"margin": 0.02, **kwargs}
    with pytest.raises(ValueError, match=message):
        sequential_decision(*make_pairs(50, 5, 5, 40), **kwargs)


def test_non_binary_scores_are_refused():
    with pytest.raises(ValueError, match="binary"):
        sequential_decision([0.5, 1.0], [1.0, 1.0], looks=1, margin=0.02)
