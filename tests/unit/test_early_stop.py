"""Sequential early stop as the runner and the verdict use it: seeded order, looks per
chunk, the alpha split, and verdicts of stopped and unstopped tasks."""

from __future__ import annotations

import numpy as np
import pytest

from evals import stats
from evals.analyse.task_analysis import analyse_task
from evals.pair.pairing import PairedTask
from evals.analyse.early_stop import chunks, first_items, item_order, sequential_for_task
from evals.plan.schedule import final_alpha, look_alpha
from evals.decide.verdict import Verdict, decide


@pytest.fixture(autouse=True)
def no_records(monkeypatch):
    monkeypatch.setattr("evals.analyse.task_analysis._labels", lambda p: None)
    monkeypatch.setattr("evals.analyse.task_analysis._lengths", lambda p: None)


def _run(task: str, n_items: int, used: int, p_base: float, p_loss: float, p_gain: float,
         seed: int = 0) -> tuple[PairedTask, np.ndarray]:
    """The first `used` items of the seeded order, as a candidate that stopped would leave
    them (doc ids in lm-eval's order, not run order)."""
    rng = np.random.default_rng(seed)
    base = (rng.random(n_items) < p_base).astype(float)
    u = rng.random(n_items)
    cand = np.where(base == 1, (u >= p_loss).astype(float), (u < p_gain).astype(float))
    order = item_order(n_items, 1234, task)
    ran = np.sort(order[:used])
    return PairedTask(task=task, metric="acc", filter="none", doc_ids=tuple(int(d) for d in ran),
                      baseline=base[ran], candidate=cand[ran], baseline_records=(),
                      candidate_records=()), order


def test_item_order_is_seeded_per_task_and_a_permutation():
    a = item_order(1200, 1234, "tiny_addition")
    assert sorted(a.tolist()) == list(range(1200))
    assert np.array_equal(a, item_order(1200, 1234, "tiny_addition"))
    assert not np.array_equal(a, item_order(1200, 1234, "tiny_reviews_gen"))
    assert not np.array_equal(a, item_order(1200, 1235, "tiny_addition"))
    parts = chunks(a, 100)
    assert [len(p) for p in parts] == [100] * 12
    assert np.array_equal(np.concatenate(parts), a)
    assert [len(p) for p in chunks(a[:250], 100)] == [100, 100, 50]


def test_looks_follow_run_order_and_match_the_e_process_reference():
    paired, order = _run("t", 1200, 400, 0.85, 0.25, 0.05)
    summary = sequential_for_task(paired, order, chunk=100, alpha=0.025, margin=0.03,
                                  n_items=1200)
    position = {int(d): i for i, d in enumerate(order)}
    run = sorted(range(paired.n), key=lambda i: position[paired.doc_ids[i]])
    reference = stats.sequential_decision(paired.baseline[run], paired.candidate[run],
                                          looks=[100, 200, 300, 400], margin=0.03, alpha=0.025)
    assert summary.decision == reference.decision == "regression"
    assert summary.items_used == reference.items_used
    assert summary.log_evalue_regression == reference.looks[-1].log_evalue_regression
    assert summary.n_items == 1200 and summary.stopped_early
    assert summary.pvalue_regression == pytest.approx(np.exp(-summary.log_evalue_regression))


def test_items_that_are_not_a_prefix_of_the_order_are_refused():
    paired, order = _run("t", 1200, 200, 0.85, 0.1, 0.1)
    shuffled = np.roll(order, 7)
    with pytest.raises(ValueError, match="prefix of the seeded run order"):
        sequential_for_task(paired, shuffled, chunk=100, alpha=0.025, margin=0.03, n_items=1200)


def test_a_non_binary_metric_is_refused():
    paired, order = _run("t", 100, 100, 0.5, 0.1, 0.1)
    scores = PairedTask(task="t", metric="f1", filter="none", doc_ids=paired.doc_ids,
                        baseline=paired.baseline * 0.5, candidate=paired.candidate,
                        baseline_records=(), candidate_records=())
    with pytest.raises(ValueError, match="needs a 0/1 metric"):
        sequential_for_task(scores, order, chunk=50, alpha=0.025, margin=0.03, n_items=100)


def _analysed(task, paired, order, n_items, gated_tasks=2):
    looks = sequential_for_task(paired, order, chunk=100, alpha=look_alpha(0.05, gated_tasks),
                                margin=0.03, n_items=n_items)
    return analyse_task(paired, gated=True, alpha=0.05, margin=0.03, seed=1, n_resamples=500,
                        sequential=looks)


def test_first_items_keeps_what_the_stopping_look_saw():
    paired, order = _run("t", 1200, 300, 0.85, 0.3, 0.02)
    kept = first_items(paired, order, 100)
    position = {int(d): i for i, d in enumerate(order)}
    assert kept.n == 100 and all(position[d] < 100 for d in kept.doc_ids)
    assert first_items(paired, order, 300) is paired


def test_alpha_split_between_looks_and_final_test():
    assert look_alpha(0.05, 2) == pytest.approx(0.0125)
    assert final_alpha(0.05) == pytest.approx(0.025)


def test_stopped_regression_and_unstopped_task_verdicts():
    drop, order_a = _run("a", 1200, 300, 0.85, 0.3, 0.02)
    same, order_b = _run("b", 1200, 1200, 0.85, 0.0, 0.0, seed=3)
    a = _analysed("a", drop, order_a, 1200)
    b = _analysed("b", same, order_b, 1200)
    assert a.sequential.decision == "regression"
    result = decide([a, b], alpha=0.05, margin=0.03)
    verdicts = {t.task: t for t in result.tasks}
    assert verdicts["a"].verdict is Verdict.REGRESSION
    assert "stopped after 100 of 1200 items" in verdicts["a"].reason
    # the adjusted p is the anytime p-value times (gated tasks / share): below alpha
    expected = min(1.0, a.sequential.pvalue_regression * 2 / 0.5)
    assert verdicts["a"].regression_pvalue_adjusted == pytest.approx(expected)
    assert verdicts["a"].regression_pvalue_adjusted < 0.05
    assert result.verdict is Verdict.REGRESSION


def test_a_task_that_ran_all_items_is_judged_at_half_alpha():
    # a drop whose fixed-sample p-value lies between alpha/2 and alpha: a fixed run would
    # flag it, the sequential run's final test (alpha/2) must not
    n = 1200
    base = np.ones(n)  # in run order; flips spread evenly so that no look stops early
    base[np.arange(24) * 50 + 25] = 0
    cand = base.copy()
    cand[np.arange(40) * 30] = 0
    cand[np.arange(24) * 50 + 25] = 1
    p_fixed = stats.mcnemar_exact_from_counts(stats.flip_counts(base, cand),
                                              alternative="less").pvalue
    assert 0.025 < p_fixed < 0.05
    order = item_order(n, 1234, "c")
    # lay the outcomes out in run order so that no look crosses a boundary early
    paired = PairedTask(task="c", metric="acc", filter="none", doc_ids=tuple(range(n)),
                        baseline=base[np.argsort(order)], candidate=cand[np.argsort(order)],
                        baseline_records=(), candidate_records=())
    analysed = _analysed("c", paired, order, n, gated_tasks=1)
    assert analysed.sequential.decision == "continue"
    fixed = decide([analyse_task(paired, gated=True, alpha=0.05, margin=0.03, seed=1,
                                 n_resamples=500)], alpha=0.05, margin=0.03)
    assert fixed.verdict is Verdict.REGRESSION
    result = decide([analysed], alpha=0.05, margin=0.03)
    assert result.tasks[0].regression_pvalue_adjusted == pytest.approx(min(1.0, 2 * p_fixed))
    assert result.verdict is not Verdict.REGRESSION


def test_an_undecided_sequential_task_explains_itself_at_the_level_used():
    """Its interval and MDE are at alpha/2 (the level its fixed tests ran at), and the
    reason says so; a fixed run of the same items shows the narrower alpha interval."""
    n = 1200
    base = np.ones(n)
    base[np.arange(24) * 50 + 25] = 0
    cand = base.copy()
    cand[np.arange(40) * 30] = 0
    cand[np.arange(24) * 50 + 25] = 1
    order = item_order(n, 1234, "c")
    paired = PairedTask(task="c", metric="acc", filter="none", doc_ids=tuple(range(n)),
                        baseline=base[np.argsort(order)], candidate=cand[np.argsort(order)],
                        baseline_records=(), candidate_records=())
    sequential = _analysed("c", paired, order, n, gated_tasks=1)
    fixed = analyse_task(paired, gated=True, alpha=0.05, margin=0.03, seed=1, n_resamples=500)
    half = analyse_task(paired, gated=True, alpha=0.025, margin=0.03, seed=1, n_resamples=500)
    assert sequential.ci_low == pytest.approx(half.ci_low) and sequential.ci_low < fixed.ci_low
    assert sequential.mde == pytest.approx(half.mde) and sequential.mde > fixed.mde
    assert "95%" in sequential.ci_method and "90%" in fixed.ci_method
    reason = decide([sequential], alpha=0.05, margin=0.03).tasks[0].reason
    assert "at level 0.025" in reason
