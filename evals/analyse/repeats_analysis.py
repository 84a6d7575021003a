"""A sampled task's analysis (issue 53, `repeats: k`): per-item pass rates over the k
repeats and the paired rate test on their differences (evals.stats.repeats) decide the
task, in place of the one-sample-per-item tests; the answer-distribution check
(evals.stats.answer_distribution) asks whether the arms sample different answers at
some item, which a sampler that breaks the target distribution shows while mean
accuracy barely moves. Its gate is `gate.answer_distribution` (warn, fail, off).

Takes paired data (evals.pair.repeats.PairedRepeats), returns frozen results.
"""

from __future__ import annotations

import numpy as np

from evals import stats
from evals.analyse.rate_results import AnswerDistribution, RepeatsSummary
from evals.analyse.task_analysis import TaskAnalysis, task_rng, unchanged_items_bound
from evals.pair.pairing import PairedTask
from evals.pair.repeats import PairedRepeats
from evals.stats.answer_distribution import answer_distribution_test
from evals.stats.intervals import interval_level
from evals.stats.repeats import item_rates, paired_rate_test

RATE_TEST_METHOD = "sign_flip"
SIGN_FLIP_RESAMPLES = 9999
DISTRIBUTION_RESAMPLES = 999


def _distribution(reps: PairedRepeats, alpha: float, seed: int) -> AnswerDistribution:
    result = answer_distribution_test(
        [list(a) for a in reps.baseline_answers], [list(a) for a in reps.candidate_answers],
        alpha=alpha, n_resamples=DISTRIBUTION_RESAMPLES, pairing="repeat",
        seed=task_rng(seed, reps.task + ":answers"))
    top = tuple({"doc_id": reps.doc_ids[t.item], "statistic": float(t.statistic),
                 "baseline": dict(t.baseline_counts), "candidate": dict(t.candidate_counts)}
                for t in result.top_items)
    return AnswerDistribution(
        statistic=float(result.statistic), pvalue=float(result.pvalue),
        null_mean=float(result.null_mean), n_items=result.n_items, repeats=result.repeats,
        informative_items=result.informative_items, changed=result.changed, top_items=top)


def analyse_repeats(paired: PairedTask, reps: PairedRepeats, *, gated: bool, alpha: float,
                    margin: float, seed: int, n_resamples: int,
                    noise: tuple[float, int] | None = None) -> TaskAnalysis:
    """The task's analysis from its per-item pass rates: the exact (or Monte Carlo)
    sign-flip test of the rate differences for the drop and for non-inferiority at the
    margin, its interval and MDE; a paired bootstrap of the rates beside it; the answer
    distribution check.

    When no item's rate changed the sign flips have no variation to go on (p = 2^-n and a
    zero-width interval, whatever n), yet n unchanged items cannot rule out that a few
    items break outright (with 40 items, a break of 3% of them goes unseen 30% of the
    time): the task is then no more certain than n 0/1 items with no flip (Tango's test
    and interval), the larger p and the hull of the intervals."""
    rates_b, rates_c = item_rates(reps.baseline), item_rates(reps.candidate)
    test = paired_rate_test(reps.baseline, reps.candidate, margin=margin, alpha=alpha,
                            method=RATE_TEST_METHOD, n_resamples=SIGN_FLIP_RESAMPLES,
                            seed=task_rng(seed, paired.task + ":rates"))
    boot = stats.paired_bootstrap(rates_b, rates_c, rng=task_rng(seed, paired.task),
                                  n_resamples=n_resamples, confidence_level=interval_level(alpha))
    d = rates_c - rates_b
    how = "exact" if test.exact else f"{test.n_resamples} random sign vectors"
    p_ni, low, high, bounded = float(test.pvalue), float(test.ci_low), float(test.ci_high), ""
    if test.degenerate:  # no item changed
        p_ni, low, high, bounded = unchanged_items_bound(int(d.size), margin, alpha, p_ni,
                                                         low, high)
    return TaskAnalysis(
        task=paired.task, metric=paired.metric, filter=paired.filter, gated=gated,
        n=paired.n, binary=False, baseline_mean=float(rates_b.mean()),
        candidate_mean=float(rates_c.mean()), delta=float(test.delta),
        ci_low=low, ci_high=high,
        ci_method=f"sign-flip interval of per-item pass-rate differences "
                  f"({test.confidence_level:.0%}, {reps.repeats} repeats per item){bounded}",
        regression_pvalue=float(test.pvalue_drop),
        regression_test=f"sign-flip permutation test on per-item pass rates over "
                        f"{reps.repeats} repeats ({how}), one-sided",
        noninferiority_pvalue=p_ni,
        noninferiority_test=f"sign-flip test of per-item pass rates at margin {margin:g}"
                            f"{bounded}",
        correct_to_wrong=int(np.sum(d < 0)), wrong_to_correct=int(np.sum(d > 0)),
        flip_rate=float(np.mean(d != 0)), mde=float(test.mde) if np.isfinite(test.mde) else None,
        mde_note=None if np.isfinite(test.mde) else "no variation in the rate differences",
        bootstrap_low=boot.low, bootstrap_high=boot.high, degenerate=test.degenerate,
        labels=None, lengths=None,
        noise_flip_rate=None if noise is None else noise[0],
        noise_flips=None if noise is None else noise[1],
        repeats=RepeatsSummary(repeats=reps.repeats, method=RATE_TEST_METHOD,
                               missing=test.missing, items_dropped=int(np.sum(d < 0)),
                               items_gained=int(np.sum(d > 0))),
        answer_distribution=_distribution(reps, alpha, seed))


def distribution_changes(analyses: list[TaskAnalysis], alpha: float) -> list[tuple[str, float]]:
    """(task, Holm-adjusted p) of each gated task whose answer distribution changed, Holm
    over the gated tasks that have the check."""
    checked = [a for a in analyses if a.gated and a.answer_distribution is not None]
    if not checked:
        return []
    pvalues = [a.answer_distribution.pvalue for a in checked]
    adjusted = (stats.holm(pvalues, alpha=alpha).pvalues_adjusted if len(pvalues) > 1
                else pvalues)
    return [(a.task, float(p)) for a, p in zip(checked, adjusted) if p <= alpha]
