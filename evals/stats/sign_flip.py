"""The paired sign-flip permutation test on per-item differences, with its inverted interval.

Under "no change" an item's difference d_i is as likely to be d_i as -d_i (the arms'
samples at an item are exchangeable, so swapping the arm labels of all of them flips the
sign), and the mean difference is referred to its distribution over the 2^n sign vectors
(Fisher 1935, The Design of Experiments, sec. 21; Good 2005, Permutation, Parametric and
Bootstrap Tests of Hypotheses, ch. 3). Exact enumeration when 2^n <= n_resamples, else
Monte Carlo with the observed sign vector counted once (p = (1 + hits) / (B + 1), Phipson
& Smyth 2010, SAGMB 9:39) - the rules of :func:`scipy.stats.permutation_test`, which the
tests use as the reference.

Shifted nulls (H0: mean = mu) flip the signs of d_i - mu; that assumes the differences
are symmetric about mu, not only exchangeable. Inverting the one-sided tests over mu with
one fixed set of sign vectors gives a closed form (Hartigan 1969, JASA 64:1303-1317): the
vector s rejects "mean <= mu" exactly when mu is below the mean of d over the items s
flips, so the bounds are order statistics of those subset means.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK_CELLS = 2_000_000  # sign-vector cells held at once (16 MB of float64)
_MAX_EXACT_ITEMS = 20
_TIE = 100 * np.finfo(np.float64).eps


@dataclass(frozen=True, slots=True)
class SignFlipResult:
    pvalue_greater: float
    """H1: the mean difference exceeds ``mu_greater``."""
    pvalue_less: float
    """H1: the mean difference is below 0."""
    ci_low: float
    ci_high: float
    exact: bool
    n_resamples: int
    """Sign vectors used (2^n when exact)."""


def _sign_chunks(n: int, n_resamples: int, rng: np.random.Generator, exact: bool):
    rows = max(1, _CHUNK_CELLS // n)
    if exact:
        codes = np.arange(2**n)
        for start in range(0, codes.size, rows):
            bits = (codes[start:start + rows, None] >> np.arange(n)) & 1
            yield 1.0 - 2.0 * bits
        return
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        yield 1.0 - 2.0 * rng.integers(0, 2, size=(size, n))


def _order_statistic(values: np.ndarray, count: int, default: float) -> float:
    """The count-th smallest value (1-based), or `default` when count < 1."""
    if count < 1:
        return default
    return float(np.partition(values, count - 1)[count - 1])


def sign_flip_test(d: np.ndarray, *, mu_greater: float, alpha: float, n_resamples: int,
                   rng: np.random.Generator, bounds: tuple[float, float]) -> SignFlipResult:
    """One-sided sign-flip tests of mean(d) > mu_greater and mean(d) < 0, and the two-sided
    1 - 2 alpha interval from inverting them (clipped to `bounds`, the range the mean can
    take). `d` is a finite 1-D array of per-item differences."""
    n = d.size
    exact = n <= _MAX_EXACT_ITEMS and 2**n <= n_resamples
    adjust = 0 if exact else 1
    total = float(d.sum())
    shifted = d - mu_greater
    observed_greater, observed_less = float(shifted.mean()), float(d.mean())
    # equal up to rounding counts as "as extreme" (scipy.stats.permutation_test's relative
    # tolerance, here relative to the data's scale so that a mean of 0 has ties too)
    tol_greater = _TIE * max(abs(observed_greater), float(np.abs(shifted).mean()))
    tol_less = _TIE * max(abs(observed_less), float(np.abs(d).mean()))
    hits_greater = hits_less = used = 0
    subset_means = []
    for signs in _sign_chunks(n, n_resamples, rng, exact):
        hits_greater += int(np.count_nonzero(signs @ shifted / n >= observed_greater - tol_greater))
        flipped_sum = signs @ d
        hits_less += int(np.count_nonzero(flipped_sum / n <= observed_less + tol_less))
        flipped = (n - signs.sum(axis=1)) / 2.0
        with np.errstate(invalid="ignore", divide="ignore"):
            subset_means.append(np.where(flipped > 0, (total - flipped_sum) / 2.0 / flipped,
                                         np.nan))
        used += signs.shape[0]
    means = np.concatenate(subset_means)
    # the smallest count m of vectors "not rejecting" with (adjust + m) / (B + adjust) > alpha
    count = int(np.floor(alpha * (used + adjust) - adjust)) + 1
    # the all-plus vector never rejects: it sits below every mu for the lower bound and
    # above every mu for the upper one
    low = _order_statistic(np.where(np.isnan(means), -np.inf, means), count, -np.inf)
    high = -_order_statistic(np.where(np.isnan(means), -np.inf, -means), count, -np.inf)
    return SignFlipResult(
        pvalue_greater=min(1.0, (hits_greater + adjust) / (used + adjust)),
        pvalue_less=min(1.0, (hits_less + adjust) / (used + adjust)),
        ci_low=float(np.clip(low, *bounds)), ci_high=float(np.clip(high, *bounds)),
        exact=exact, n_resamples=used)
