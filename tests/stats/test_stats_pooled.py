"""The pooled gate: the exact stratified McNemar test (checked against statsmodels'
Mantel-Haenszel test over pair strata and against scipy's binomial test), and its
calibration and power inside the decision rule, by simulation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.contingency_tables import StratifiedTable

from evals.analyse.task_analysis import analyse_task
from evals.pair.pairing import PairedTask
from evals.stats import FlipCounts, pooled_mcnemar
from evals.decide.verdict import Verdict, decide


def _counts(b: int, c: int, n: int = 1000) -> FlipCounts:
    return FlipCounts(n=n, both_correct=n - b - c, both_wrong=0, correct_to_wrong=b,
                      wrong_to_correct=c)


def test_matches_mantel_haenszel_over_pair_strata_and_the_binomial_test():
    tasks = [(7, 3), (12, 9), (4, 0)]
    result = pooled_mcnemar([_counts(b, c) for b, c in tasks])
    # every discordant pair is a stratum: rows = arm, columns = correct / wrong
    down = np.array([[1, 0], [0, 1]])  # baseline correct, candidate wrong
    up = np.array([[0, 1], [1, 0]])
    strata = [down] * sum(b for b, _ in tasks) + [up] * sum(c for _, c in tasks)
    mh = StratifiedTable(np.dstack(strata)).test_null_odds(correction=False)
    assert result.chi2 == pytest.approx(mh.statistic, rel=1e-12)
    b, m = 23, 35
    assert result.statistic == b and result.discordant == m
    assert result.pvalue == pytest.approx(sps.binomtest(b, m, 0.5, alternative="greater").pvalue,
                                          rel=1e-12)


def test_one_task_is_the_per_task_mcnemar_and_no_flips_is_p_1():
    one = pooled_mcnemar([_counts(9, 2)])
    assert one.pvalue == pytest.approx(sps.binomtest(9, 11, 0.5, alternative="greater").pvalue)
    assert pooled_mcnemar([_counts(0, 0), _counts(0, 0)]).pvalue == 1.0
    with pytest.raises(ValueError, match="at least one task"):
        pooled_mcnemar([])


@pytest.fixture(scope="module")
def template():
    p = PairedTask(task="t", metric="acc", filter="none", doc_ids=(0, 1, 2, 3),
                   baseline=np.array([1.0, 0, 1, 0]), candidate=np.array([1.0, 0, 1, 0]),
                   baseline_records=(), candidate_records=())
    with pytest.MonkeyPatch.context() as patch:  # no sample records: no label/length analysis
        patch.setattr("evals.analyse.task_analysis._labels", lambda p: None)
        patch.setattr("evals.analyse.task_analysis._lengths", lambda p: None)
        return analyse_task(p, gated=True, alpha=0.05, margin=0.03, seed=1, n_resamples=100)


def _simulate(template, rng, n_sims, tasks, items, discordance, drop, pooled):
    """Per simulated run: per-task flip counts drawn from the paired multinomial, the
    per-task exact McNemar and a non-inferiority p (Tango is not needed for REGRESSION),
    then the decision rule. Returns the share of runs ending REGRESSION."""
    p_down, p_up = (discordance + drop) / 2, (discordance - drop) / 2
    regressions = 0
    for _ in range(n_sims):
        analyses = []
        for k in range(tasks):
            b, c, _ = rng.multinomial(items, [p_down, p_up, 1 - p_down - p_up])
            p = 1.0 if b + c == 0 else float(sps.binom.sf(b - 1, b + c, 0.5))
            analyses.append(replace(template, task=f"t{k}", n=items, correct_to_wrong=int(b),
                                    wrong_to_correct=int(c), regression_pvalue=p,
                                    noninferiority_pvalue=1.0))
        if decide(analyses, alpha=0.05, margin=0.03, pooled=pooled).verdict is \
                Verdict.REGRESSION:
            regressions += 1
    return regressions / n_sims


def test_pooled_gate_keeps_its_level_and_finds_drops_holm_misses(template):
    rng = np.random.default_rng(2026)
    n_sims = 3000
    se = np.sqrt(0.05 * 0.95 / n_sims)
    null_pooled = _simulate(template, rng, n_sims, 5, 1000, 0.06, 0.0, pooled=True)
    null_holm = _simulate(template, rng, n_sims, 5, 1000, 0.06, 0.0, pooled=False)
    # the exact tests are conservative; the pooled test in the Holm family stays <= alpha
    assert null_pooled <= 0.05 + 3 * se and null_holm <= 0.05 + 3 * se
    # ten tasks each losing 1 point (6% of items flipping): no task alone is likely to show
    power = {}
    for pooled in (False, True):
        power[pooled] = _simulate(template, rng, 600, 10, 1000, 0.06, 0.01, pooled=pooled)
    assert power[True] > power[False] + 0.3, power
    print(f"\nfalse alarms at alpha 0.05 (5 tasks x 1000 items, 6% discordance, "
          f"{n_sims} runs): pooled gate {null_pooled:.3f}, Holm only {null_holm:.3f}; power "
          f"for a 1-point drop in each of 10 tasks: pooled {power[True]:.2f}, Holm only "
          f"{power[False]:.2f}")
