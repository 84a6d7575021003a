"""A/As resampled from a pool of recorded samples: both tests' false alarms within alpha +
2 SE on a pool with items of every difficulty, and the pool's shape checked."""

from __future__ import annotations

import numpy as np
import pytest

from evals.stats.aa_resampling import aa_resampled_false_alarms

LABELS = np.array(list("ABCD"))


def _pool(rng, n=80, m=24):
    """m recorded answers per item (one sampler, distinct seeds); "A" is correct."""
    probabilities = rng.dirichlet(np.full(4, 0.6), n)
    u = rng.random((n, m, 1))
    answers = LABELS[np.minimum((u > np.cumsum(probabilities, axis=1)[:, None]).sum(2), 3)]
    return (answers == "A").astype(float), answers.tolist()


@pytest.mark.parametrize("method", ["sign_flip", "t"])
def test_resampled_aas_of_one_sampler_stay_within_alpha_plus_2se(method):
    outcomes, answers = _pool(np.random.default_rng(2))
    result = aa_resampled_false_alarms(outcomes, answers, repeats=8, margin=0.05, n_aas=200,
                                       method=method, n_resamples=199, seed=4)
    print(f"\n{method}: rate test {result.rate_false_alarms:.3f}, distribution check "
          f"{result.distribution_false_alarms:.3f} over 200 resampled A/As "
          f"(limit {result.limit:.3f})")
    assert result.within_limit and result.rate_pvalues.size == 200
    assert (result.repeats, result.pool_size) == (8, 24)
    assert result.rate_false_alarms > 0 or result.distribution_false_alarms > 0  # not dead


def test_pool_shape_is_checked():
    outcomes, answers = _pool(np.random.default_rng(3), n=5, m=10)
    with pytest.raises(ValueError, match="needs 2 x 8 = 16 distinct samples per item but the "
                                         "pool has 10"):
        aa_resampled_false_alarms(outcomes, answers, repeats=8, margin=0.05)
    with pytest.raises(ValueError, match="one answer per recorded sample"):
        aa_resampled_false_alarms(outcomes, answers[:4], repeats=4, margin=0.05)
    with pytest.raises(ValueError, match="n_aas must be an integer >= 1"):
        aa_resampled_false_alarms(outcomes, answers, repeats=4, margin=0.05, n_aas=0)
