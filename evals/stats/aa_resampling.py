"""False alarms of the rate test and the answer-distribution check on A/As resampled from
recorded samples.

Simulations check the tests on models of the data; this checks them on the data. Given
per item a pool of m recorded samples of one configuration drawn with distinct seeds (for
example the baseline's k repeats under each of several run seeds), each resampled A/A
draws 2k of an item's samples without replacement and gives k to each arm. The two arms
are then draws of one sampler, independent given the item: an A/A in the hardest regime
for the null, since paired seeds would make the arms agree more. The share of resampled
A/As that either test flags at ``alpha`` estimates its false-alarm rate on these items,
with their real spread of pass rates and answers. Resampled A/As share samples, so their
alarms are positively correlated and the binomial standard error sqrt(alpha (1 - alpha) /
B) understates the rate's spread: the limit alpha + 2 SE is a screen, not a test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .answer_distribution import answer_distribution_test
from .repeats import paired_rate_test
from .validation import as_outcomes, as_rng, check_alpha, check_positive_int


@dataclass(frozen=True, slots=True, eq=False)
class AaResamplingResult:
    """Alarms of both tests over the resampled A/As."""

    n_aas: int
    repeats: int
    pool_size: int
    """m, recorded samples per item."""
    alpha: float
    rate_pvalues: np.ndarray
    """The rate test's drop p-value of each resampled A/A."""
    distribution_pvalues: np.ndarray
    """The answer-distribution check's p-value of each resampled A/A."""

    @property
    def limit(self) -> float:
        """alpha + 2 binomial standard errors at ``n_aas`` A/As."""
        return self.alpha + 2.0 * math.sqrt(self.alpha * (1.0 - self.alpha) / self.n_aas)

    @property
    def rate_false_alarms(self) -> float:
        """Share of resampled A/As whose drop p-value is <= alpha."""
        return float(np.mean(self.rate_pvalues <= self.alpha))

    @property
    def distribution_false_alarms(self) -> float:
        """Share of resampled A/As the answer-distribution check flags."""
        return float(np.mean(self.distribution_pvalues <= self.alpha))

    @property
    def within_limit(self) -> bool:
        return max(self.rate_false_alarms, self.distribution_false_alarms) <= self.limit


def _pool_answers(values: Any, shape: tuple[int, int]) -> np.ndarray:
    rows = [list(row) for row in values]
    if len(rows) != shape[0] or any(len(row) != shape[1] for row in rows):
        sizes = sorted({len(row) for row in rows})
        raise ValueError(
            f"pool_answers must have one answer per recorded sample, shape {shape}; it has "
            f"{len(rows)} items with {sizes} samples each.")
    answers = np.empty(shape, dtype=object)
    for i, row in enumerate(rows):
        for j, answer in enumerate(row):
            answers[i, j] = answer  # element by element: a tuple answer stays one label
    return answers


def aa_resampled_false_alarms(pool_outcomes: Any, pool_answers: Any, *, repeats: int,
                              margin: float, n_aas: int = 200, alpha: float = 0.05,
                              method: str = "sign_flip", n_resamples: int = 999,
                              seed: int | np.random.Generator = 0) -> AaResamplingResult:
    """Run both tests on ``n_aas`` A/As resampled from the recorded samples.

    ``pool_outcomes`` (n_items, m) holds each recorded sample's 0/1 outcome and
    ``pool_answers`` its extracted answer, sample j of an item the same sample in both;
    m >= 2 ``repeats``. ``margin``, ``method`` and ``n_resamples`` go to the tests.
    """
    outcomes = as_outcomes(pool_outcomes, "pool_outcomes")
    answers = _pool_answers(pool_answers, outcomes.shape)
    k = check_positive_int(repeats, "repeats")
    n_aas = check_positive_int(n_aas, "n_aas")
    alpha = check_alpha(alpha)
    n, m = outcomes.shape
    if m < 2 * k:
        raise ValueError(
            f"an A/A of {k} repeats per arm needs 2 x {k} = {2 * k} distinct samples per item "
            f"but the pool has {m}; record more seeds or lower repeats.")
    rng = as_rng(seed)
    rows = np.arange(n)[:, None]
    rate_p, distribution_p = np.empty(n_aas), np.empty(n_aas)
    for index in range(n_aas):
        drawn = np.argsort(rng.random((n, m)), axis=1)[:, :2 * k]
        base, cand = drawn[:, :k], drawn[:, k:]
        rate_p[index] = paired_rate_test(
            outcomes[rows, base], outcomes[rows, cand], margin=margin, alpha=alpha,
            method=method, n_resamples=n_resamples, seed=rng).pvalue_drop
        distribution_p[index] = answer_distribution_test(
            answers[rows, base].tolist(), answers[rows, cand].tolist(), alpha=alpha,
            n_resamples=n_resamples, seed=rng).pvalue
    rate_p.setflags(write=False)
    distribution_p.setflags(write=False)
    return AaResamplingResult(n_aas=n_aas, repeats=k, pool_size=m, alpha=alpha,
                              rate_pvalues=rate_p, distribution_pvalues=distribution_p)
