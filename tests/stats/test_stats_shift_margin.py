"""The distribution-shift test with a margin (evals.stats.divergence.shift_test): its
p-value against statsmodels' one-sample t-test, and by simulation its false-alarm rate on
replicate schedules like a GPU's, where the candidate and the A/A rerun are not
exchangeable (run order, shared warm state), and its power on a real shift."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.weightstats import DescrStatsW

from evals.plan.config import SHIFT_MARGIN_NATS
from evals.stats.divergence import shift_test

ALPHA = 0.05
TRIALS = 400
DELTA = SHIFT_MARGIN_NATS


def _bound(rate: float = ALPHA, trials: int = TRIALS) -> float:
    return rate + 2 * math.sqrt(rate * (1 - rate) / trials)


def _lognormal_with_mean(rng, mean: float, sigma: float, size) -> np.ndarray:
    """Right-skewed KL-like values with the given mean (lognormal: mean exp(mu + s^2/2))."""
    return rng.lognormal(math.log(mean) - sigma ** 2 / 2, sigma, size)


def test_the_p_value_is_statsmodels_one_sided_t_test_against_the_margin():
    rng = np.random.default_rng(3)
    for _ in range(5):
        rerun = rng.exponential(1e-5, 40)
        cand = rerun + rng.normal(2e-4, 3e-4, 40)
        result = shift_test(cand, rerun, rng=np.random.default_rng(0), margin=1e-4,
                            n_resamples=200)
        tstat, pvalue, _ = DescrStatsW(cand - rerun).ttest_mean(value=1e-4,
                                                                 alternative="larger")
        assert result.statistic == pytest.approx(tstat, rel=1e-9)
        assert result.pvalue == pytest.approx(pvalue, rel=1e-9)
        assert result.margin == 1e-4
        assert result.mean_difference == pytest.approx(float(np.mean(cand - rerun)))


def test_a_bad_margin_is_refused():
    for bad in (-1e-4, math.nan, math.inf):
        with pytest.raises(ValueError, match="margin"):
            shift_test([0.1, 0.2], [0.0, 0.0], rng=np.random.default_rng(0), margin=bad)


@pytest.mark.parametrize("schedule", ["bit-identical rerun", "order effect", "warm state"])
def test_false_alarms_stay_within_alpha_at_the_margin(schedule):
    """Null at its boundary: the mean excess is exactly delta, the hardest null. Three
    schedules a GPU gives (candidate and rerun not exchangeable):
    - bit-identical rerun: the rerun reproduces the baseline exactly (KL 0, as a rerun that
      repeats the baseline's batches), the candidate carries all the noise;
    - order effect: the rerun's noise is 100x smaller than the candidate's (later arms run
      with a warmer cache), and the candidate's excess is skewed;
    - warm state: 70% of the items identical in both (exact zeros), the rest heavy-tailed.
    The rejection rate at alpha stays within alpha + 2 SE over 400 runs of 300 items."""
    rng = np.random.default_rng({"bit-identical rerun": 11, "order effect": 12,
                                 "warm state": 13}[schedule])
    rejections = 0
    for _ in range(TRIALS):
        n = 300
        if schedule == "bit-identical rerun":
            rerun = np.zeros(n)
            cand = _lognormal_with_mean(rng, DELTA, 1.5, n)
        elif schedule == "order effect":
            rerun = _lognormal_with_mean(rng, DELTA / 100, 1.0, n)
            cand = rerun + _lognormal_with_mean(rng, DELTA, 2.0, n)
        else:
            moved = rng.random(n) < 0.3
            rerun = np.where(moved, _lognormal_with_mean(rng, DELTA / 10, 1.0, n), 0.0)
            excess = _lognormal_with_mean(rng, DELTA / 0.3, 1.5, n)
            cand = rerun + np.where(moved, excess, 0.0)
        result = shift_test(cand, rerun, rng=rng, margin=DELTA, n_resamples=50)
        rejections += result.pvalue <= ALPHA
    assert rejections / TRIALS <= _bound(), rejections


def test_kernel_noise_below_the_margin_is_no_shift_where_a_test_without_one_cries_wolf():
    """A GPU A/A: candidate KL ~1e-6 nats (batching, cached vs recomputed KV), rerun ~1e-14,
    1200 items: a test of "any upward shift" (Wilcoxon, the test this margin replaced)
    rejects nearly every time, the margin test almost never."""
    rng = np.random.default_rng(21)
    old = new = 0
    trials = 200
    for _ in range(trials):
        rerun = _lognormal_with_mean(rng, 1e-14, 1.0, 1200)
        cand = _lognormal_with_mean(rng, 2e-6, 2.0, 1200)
        old += stats.wilcoxon(cand - rerun, alternative="greater").pvalue <= ALPHA
        new += shift_test(cand, rerun, rng=rng, margin=DELTA, n_resamples=50).pvalue <= ALPHA
    assert old / trials > 0.95
    assert new / trials <= _bound(trials=trials)


def test_a_shift_well_beyond_the_margin_is_found():
    """A noised model's kind of shift (mean excess 10x delta, heavy-tailed) on 300 items:
    found in at least 90% of runs."""
    rng = np.random.default_rng(31)
    found = sum(shift_test(_lognormal_with_mean(rng, 10 * DELTA, 1.5, 300), np.zeros(300),
                           rng=rng, margin=DELTA, n_resamples=50).pvalue <= ALPHA
                for _ in range(200))
    assert found / 200 >= 0.9, found
