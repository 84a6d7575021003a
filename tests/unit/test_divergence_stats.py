"""evals.stats.divergence against independent references: scipy's entropy, a direct
computation of the coarsened partition, and the exact sign-flip distribution of the
signed-rank statistic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from evals.stats.divergence import (NEAR_TIE_NATS, choice_divergence, choice_kl, coarsened_kl,
                                    flip_rates_by_margin, generation_divergence, shift_test,
                                    summarize)


def random_distribution(rng, size):
    return rng.dirichlet(np.full(size, 0.3))


def top_k(p, k):
    order = np.argsort(p)[::-1][:k]
    return {int(t): float(np.log(p[t])) for t in order}


def test_with_the_whole_vocabulary_listed_it_is_the_exact_kl():
    rng = np.random.default_rng(1)
    for _ in range(20):
        p, q = random_distribution(rng, 6), random_distribution(rng, 6)
        assert coarsened_kl(top_k(p, 6), top_k(q, 6)) == pytest.approx(stats.entropy(p, q),
                                                                         rel=1e-9, abs=1e-12)


def test_top_k_kl_is_the_kl_of_the_coarsened_partition_and_a_lower_bound():
    rng = np.random.default_rng(2)
    for _ in range(50):
        p, q = random_distribution(rng, 40), random_distribution(rng, 40)
        tp, tq = top_k(p, 5), top_k(q, 5)
        shared = sorted(set(tp) & set(tq))
        # the partition built directly: the shared tokens, then everything else
        pc = np.array([p[t] for t in shared] + [1 - sum(p[t] for t in shared)])
        qc = np.array([q[t] for t in shared] + [1 - sum(q[t] for t in shared)])
        reference = float(special.rel_entr(pc, qc).sum())
        assert coarsened_kl(tp, tq) == pytest.approx(reference, rel=1e-7, abs=1e-10)
        assert coarsened_kl(tp, tq) <= stats.entropy(p, q) + 1e-12


def test_choice_kl_is_scipys_entropy_of_the_softmaxes():
    b, c = [-1.2, -3.0, -0.4, -7.0], [-1.0, -2.5, -0.9, -6.0]
    assert choice_kl(b, c) == pytest.approx(stats.entropy(special.softmax(b),
                                                          special.softmax(c)), rel=1e-12)
    item = choice_divergence(b, c)
    assert item.top1_agree == (True,) and item.margin == pytest.approx(0.8)
    assert item.delta_p[0] == pytest.approx(special.softmax(c)[2] - special.softmax(b)[2])


def test_the_shared_prefix_ends_at_the_first_differing_token():
    lp = math.log
    base = [5, 7, 9]
    cand = [5, 8, 9]
    base_top = [{5: lp(0.9), 6: lp(0.05)}, {7: lp(0.5), 8: lp(0.45)}, {9: lp(0.99), 1: lp(0.005)}]
    cand_top = [{5: lp(0.8), 6: lp(0.1)}, {8: lp(0.5), 7: lp(0.4)}, {9: lp(0.9), 2: lp(0.05)}]
    item = generation_divergence(base, base_top, cand, cand_top)
    assert item.first_divergence == 1 and len(item.kl) == 2  # positions 0 and 1, not 2
    assert item.top1_agree == (True, False)
    assert item.delta_p == pytest.approx((0.8 - 0.9, 0.4 - 0.5))
    assert item.margin == pytest.approx(lp(0.5) - lp(0.45))
    same = generation_divergence(base, base_top, base, base_top)
    assert same.first_divergence is None and same.kl == (0.0, 0.0, 0.0)
    shorter = generation_divergence(base, base_top, base[:2], base_top[:2])
    assert shorter.first_divergence == 2 and len(shorter.kl) == 2


def test_no_differences_is_no_evidence():
    kl = [0.0, 0.1, 0.2]
    result = shift_test(kl, kl, rng=np.random.default_rng(0), margin=0.0, n_resamples=100)
    assert result.pvalue == 1.0 and result.n_informative == 0 and result.note


def test_a_real_shift_is_found():
    rng = np.random.default_rng(5)
    rerun = rng.exponential(0.01, 100)
    cand = rng.exponential(0.02, 100)
    result = shift_test(cand, rerun, rng=rng, margin=1e-3, n_resamples=500)
    assert result.pvalue < 0.01 and result.confidence_interval.low > 0


def test_summary_and_margin_strata():
    lp = math.log
    a = generation_divergence([1], [{1: lp(0.6), 2: lp(0.4)}], [1], [{1: lp(0.5), 2: lp(0.5)}])
    b = choice_divergence([-1.0, -1.001], [-1.001, -1.0])
    s = summarize([a, b])
    assert s.n_items == 2 and s.diverged == 1 and s.n_positions == 2
    assert s.mean_kl == pytest.approx((a.kl[0] + b.kl[0]) / 2)
    assert s.top1_agreement == 0.5
    rows = flip_rates_by_margin([b.margin, a.margin, 2.0, None], [True, False, False, True])
    assert b.margin <= NEAR_TIE_NATS < a.margin
    assert [r[1:] for r in rows] == [(1, 1), (0, 0), (1, 0), (1, 0)]
