"""Opt-in sequential early stopping that keeps error rates at alpha over all looks.

Both stopping rules are e-processes: non-negative supermartingales under their
null hypotheses, so by Ville's inequality (Ville 1939, *Etude critique de la notion
de collectif*) the chance that one *ever* reaches 1/alpha is at most alpha, however
many looks are taken and whenever the run stops.

* Regression. Each discordant item is correct->wrong with probability p. With
  H0 "no regression" (p <= 1/2) the statistic is Robbins' mixture likelihood ratio
  (Robbins 1970, Ann Math Statist 41:1397-1409) with a Beta(a, b) prior truncated to
  [1/2, 1]:  M_k = 2^k * integral over [1/2, 1] of p^x (1-p)^(k-x) dPrior(p),
  after k discordant items of which x went correct->wrong. Each likelihood ratio
  with p >= 1/2 is a supermartingale under every p0 <= 1/2, so the mixture is too.
* Non-inferiority. With differences d_i = candidate_i - baseline_i in [-1, 1] and
  H0 "mean difference <= -margin", the capital K_t = prod (1 + lambda_i (d_i + margin))
  with predictable bets lambda_i in [0, 0.5 / (1 - margin)] is a supermartingale under
  H0 (testing by betting: Waudby-Smith & Ramdas 2024, "Estimating means of bounded
  random variables by betting", JRSS-B 86:1-27; bets chosen by their aGRAPA rule).
  K_t >= 1/alpha is the one-sided betting confidence sequence for the mean
  difference excluding -margin.

The items must arrive in a random order that does not depend on their outcomes
(the runner shuffles with a seed); the guarantees are for i.i.d. item draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

from .validation import as_paired_binary, check_alpha, check_margin, check_positive_int

DECISIONS = ("regression", "non_inferior", "continue")
_MAX_BET = 0.5  # fraction of the largest bet that keeps capital positive


@dataclass(frozen=True, slots=True)
class SequentialLook:
    """Statistics at one interim look, on the first ``items`` items."""

    items: int
    delta: float
    """Accuracy difference (candidate - baseline) on the items seen so far."""
    correct_to_wrong: int
    wrong_to_correct: int
    log_evalue_regression: float
    """log of the mixture likelihood ratio against "no regression"."""
    log_evalue_noninferiority: float
    """log of the betting capital against "delta <= -margin"."""


@dataclass(frozen=True, slots=True)
class SequentialResult:
    """Outcome of sequential monitoring over the looks."""

    decision: str
    """'regression' (candidate worse), 'non_inferior' (loss < margin shown) or 'continue'
    (no boundary crossed by the last look)."""
    items_used: int
    """Items seen when the decision was made (the last look when 'continue')."""
    n_items: int
    alpha: float
    margin: float
    threshold: float
    """log(1/alpha): the boundary for both log e-values."""
    looks: tuple[SequentialLook, ...]
    """Looks taken, up to and including the stopping look."""


def _look_positions(looks: int | Sequence[int], n: int) -> np.ndarray:
    if isinstance(looks, (int, np.integer)) and not isinstance(looks, bool):
        step = check_positive_int(looks, "looks")
        positions = list(range(step, n + 1, step))
        if not positions or positions[-1] != n:
            positions.append(n)
        return np.asarray(positions)
    try:
        positions = np.asarray([check_positive_int(v, "each look") for v in looks])
    except TypeError:
        raise ValueError(
            "looks must be an item step (int) or an increasing sequence of item counts."
        ) from None
    if positions.size == 0 or np.any(np.diff(positions) <= 0) or positions[-1] > n:
        raise ValueError(
            f"looks must be strictly increasing item counts between 1 and {n} (the number "
            f"of items); got {list(positions)!r}."
        )
    return positions


def _log_truncated_beta_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log of the integral over [1/2, 1] of p^(a-1) (1-p)^(b-1) dp."""
    return special.betaln(a, b) + stats.beta.logsf(0.5, a, b)


def regression_log_evalue(
    correct_to_wrong: Any, discordant: Any, prior: tuple[float, float] = (1.0, 1.0)
) -> np.ndarray:
    """log Robbins mixture likelihood ratio against "p <= 1/2" (see module docstring)."""
    x = np.asarray(correct_to_wrong, dtype=np.float64)
    k = np.asarray(discordant, dtype=np.float64)
    a, b = prior
    return (
        k * math.log(2.0)
        + _log_truncated_beta_mass(a + x, b + k - x)
        - _log_truncated_beta_mass(np.float64(a), np.float64(b))
    )


def noninferiority_log_capital(differences: np.ndarray, margin: float) -> np.ndarray:
    """log capital after each item of the aGRAPA betting test of "mean <= -margin"."""
    shifted = differences + margin  # in [-(1 - margin), 1 + margin]
    t = np.arange(differences.size, dtype=np.float64)  # items seen before item i
    past_sum = np.concatenate(([0.0], np.cumsum(differences)[:-1]))
    past_squares = np.concatenate(([0.0], np.cumsum(differences**2)[:-1]))
    # Running mean and variance with one pseudo-observation (mean 0, variance 1/4).
    mean = past_sum / (t + 1.0)
    variance = (0.25 + past_squares) / (t + 1.0) - mean**2
    edge = mean + margin
    bet = np.clip(edge / (variance + edge**2), 0.0, _MAX_BET / (1.0 - margin))
    return np.cumsum(np.log1p(bet * shifted))


def sequential_decision(
    baseline: Any,
    candidate: Any,
    looks: int | Sequence[int],
    margin: float,
    alpha: float = 0.05,
    *,
    prior: tuple[float, float] = (1.0, 1.0),
) -> SequentialResult:
    """Decide at interim looks whether to stop: regression, non-inferior or continue.

    ``baseline``/``candidate`` are 0/1 scores in the (random) order items are run;
    ``looks`` is an item step (e.g. 50) or increasing item counts. At each look the
    regression e-value is checked first, so a significant loss that is still within
    the margin stops as 'regression'. The chance of a false 'regression' when the
    candidate is not worse, and of a false 'non_inferior' when it loses at least
    ``margin``, are each at most ``alpha`` over all looks. ``prior`` are the Beta
    parameters of the mixture over P(correct -> wrong | changed), truncated to [1/2, 1].
    """
    base, cand = as_paired_binary(baseline, candidate)
    margin, alpha = check_margin(margin), check_alpha(alpha)
    if len(prior) != 2 or not all(float(v) > 0 for v in prior):
        raise ValueError(f"prior must be two positive Beta parameters (a, b); got {prior!r}.")
    n = base.size
    positions = _look_positions(looks, n)
    loss = np.cumsum(base & ~cand)[positions - 1]
    gain = np.cumsum(~base & cand)[positions - 1]
    log_regression = regression_log_evalue(loss, loss + gain, prior)
    differences = cand.astype(np.float64) - base.astype(np.float64)
    log_noninferiority = noninferiority_log_capital(differences, margin)[positions - 1]
    threshold = math.log(1.0 / alpha)

    taken = []
    decision = "continue"
    for i, items in enumerate(positions):
        taken.append(
            SequentialLook(
                items=int(items),
                delta=float((gain[i] - loss[i]) / items),
                correct_to_wrong=int(loss[i]),
                wrong_to_correct=int(gain[i]),
                log_evalue_regression=float(log_regression[i]),
                log_evalue_noninferiority=float(log_noninferiority[i]),
            )
        )
        if log_regression[i] >= threshold:
            decision = "regression"
            break
        if log_noninferiority[i] >= threshold:
            decision = "non_inferior"
            break
    return SequentialResult(
        decision=decision,
        items_used=taken[-1].items,
        n_items=int(n),
        alpha=alpha,
        margin=margin,
        threshold=threshold,
        looks=tuple(taken),
    )
