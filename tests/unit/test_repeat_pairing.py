"""Sampled repeats paired by (item, repeat) (evals.pair.repeats), the task decided on its
per-item pass rates with the answer-distribution check beside it
(evals.analyse.repeats_analysis), and the check's gate (`gate.answer_distribution`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from evals.analyse.repeats_analysis import analyse_repeats, distribution_changes
from evals.decide.verdict import Verdict, apply_answer_gate, decide
from evals.errors import UserError
from evals.pair.pairing import PairedTask, pair_task
from evals.pair.repeats import RepeatScores, pair_repeats, with_rates
from evals.pair.samples import ArmSamples, SampleRecord, _repeats
from evals.pipelines.compare import filter_of, metric_of
from evals.stats.repeats import paired_rate_test


def _scores(source: str, answers: dict[int, list[str]], truth: str = "7") -> RepeatScores:
    items = {d: {"doc_id": d, "responses": [" " + a for a in ans],
                 "answers": {"strip": list(ans)},
                 "scores": {"strip": {"exact_match": [float(a == truth) for a in ans]}}}
             for d, ans in answers.items()}
    k = len(next(iter(answers.values())))
    return RepeatScores(source, "t", k, items)


def _paired(doc_ids) -> PairedTask:
    n = len(doc_ids)
    return PairedTask(task="t", metric="exact_match", filter="strip", doc_ids=tuple(doc_ids),
                      baseline=np.zeros(n), candidate=np.zeros(n), baseline_records=(),
                      candidate_records=())


def test_repeat_r_of_item_i_is_paired_with_repeat_r_of_item_i():
    base = _scores("b", {0: ["7", "7", "1"], 1: ["2", "7", "7"]})
    cand = _scores("c", {1: ["7", "3", "7"], 0: ["7", "1", "7"]})
    reps = pair_repeats(_paired([0, 1]), base, cand, "run")
    assert reps.repeats == 3 and reps.doc_ids == (0, 1)
    assert reps.baseline.tolist() == [[1, 1, 0], [0, 1, 1]]
    assert reps.candidate.tolist() == [[1, 0, 1], [1, 0, 1]]
    assert reps.candidate_answers[1] == ("7", "3", "7")
    assert pair_repeats(_paired([0]), None, None, "run") is None


@pytest.mark.parametrize("base, cand, expected", [
    (_scores("b/arm", {0: ["7", "7"]}), _scores("c/arm", {0: ["7", "7", "7"]}),
     "b/arm holds 2 repeats per item, c/arm 3"),
    (_scores("b/arm", {0: ["7", "7"]}), None, "only b/arm holds repeats"),
    (_scores("b/arm", {0: ["7", "7"]}), _scores("c/arm", {1: ["7", "7"]}),
     "doc_id 0 has no repeats in c/arm"),
])
def test_mismatched_repeats_are_an_error_naming_both(base, cand, expected):
    with pytest.raises(UserError, match=expected):
        pair_repeats(_paired([0]), base, cand, "run")


def _task(n: int, k: int, p_base: float, p_cand: float, seed: int, wrong_cand="1"):
    rng = np.random.default_rng(seed)
    base = {d: ["7" if rng.random() < p_base else "1" for _ in range(k)] for d in range(n)}
    cand = {d: ["7" if rng.random() < p_cand else wrong_cand for _ in range(k)]
            for d in range(n)}
    return _paired(range(n)), pair_repeats(_paired(range(n)), _scores("b", base),
                                           _scores("c", cand), "run")


def test_the_task_is_decided_by_the_rate_test_on_item_rates():
    paired, reps = _task(30, 4, 0.8, 0.8, seed=1)
    a = analyse_repeats(paired, reps, gated=True, alpha=0.05, margin=0.1, seed=3,
                        n_resamples=1000)
    same = paired_rate_test(reps.baseline, reps.candidate, margin=0.1, alpha=0.05,
                            seed=np.random.default_rng(0))
    assert a.delta == pytest.approx(reps.candidate.mean(1).mean() - reps.baseline.mean(1).mean())
    assert a.delta == pytest.approx(same.delta)
    assert a.regression_pvalue == pytest.approx(same.pvalue_drop, abs=0.02)
    assert a.repeats.repeats == 4 and not a.binary
    assert "4 repeats" in a.regression_test and a.answer_distribution.repeats == 4


def test_a_big_drop_is_a_regression_and_other_wrong_answers_change_the_distribution():
    paired, reps = _task(40, 4, 0.9, 0.3, seed=2, wrong_cand="5")
    a = analyse_repeats(paired, reps, gated=True, alpha=0.05, margin=0.05, seed=3,
                        n_resamples=1000)
    assert a.delta < -0.4 and a.regression_pvalue < 0.001
    verdict = decide([a], alpha=0.05, margin=0.05)
    assert verdict.verdict is Verdict.REGRESSION
    assert a.answer_distribution.changed
    assert distribution_changes([a], 0.05)[0][0] == "t"


def test_the_answer_gate_fails_a_pass_only_when_asked():
    paired, reps = _task(40, 4, 0.8, 0.8, seed=5, wrong_cand="5")  # same rate, other answers
    a = analyse_repeats(paired, reps, gated=True, alpha=0.05, margin=0.2, seed=3,
                        n_resamples=1000)
    verdict = decide([a], alpha=0.05, margin=0.2)
    assert verdict.verdict is Verdict.PASS
    changed = distribution_changes([a], 0.05)
    assert changed, a.answer_distribution
    failed = apply_answer_gate(verdict, changed)
    assert failed.verdict is Verdict.REGRESSION and "gate.answer_distribution" in failed.reason
    assert apply_answer_gate(verdict, []).verdict is Verdict.PASS
    # non-inferiority not shown (too few items for the margin): a changed distribution
    # still fails the run; without one it stays INCONCLUSIVE
    tight = analyse_repeats(paired, reps, gated=True, alpha=0.05, margin=0.001, seed=3,
                            n_resamples=1000)
    unsure = decide([tight], alpha=0.05, margin=0.001)
    assert unsure.verdict is Verdict.INCONCLUSIVE
    assert apply_answer_gate(unsure, changed).verdict is Verdict.REGRESSION
    assert apply_answer_gate(unsure, []).verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("n, passes", [(40, False), (200, True)])
def test_no_item_changed_is_no_more_certain_than_as_many_items_with_no_flip(n, passes):
    # the same samples in both arms: the sign flips alone give p <= 1e-4 and [0, 0]; the
    # task is bounded as n 0/1 items with no flip are (Tango with no discordant pair:
    # the interval +-z^2 / (n + z^2), the non-inferiority p Phi(-sqrt(n m / (1 - m))))
    rng = np.random.default_rng(n)
    same = {d: ["7" if rng.random() < 0.7 else "1" for _ in range(8)] for d in range(n)}
    paired = _paired(range(n))
    reps = pair_repeats(paired, _scores("b", same), _scores("c", same), "run")
    margin, z = 0.03, 1.6448536269514722
    a = analyse_repeats(paired, reps, gated=True, alpha=0.05, margin=margin, seed=3,
                        n_resamples=1000)
    sign_flips = paired_rate_test(reps.baseline, reps.candidate, margin=margin, alpha=0.05)
    assert sign_flips.pvalue <= 1e-4 and sign_flips.ci_low == sign_flips.ci_high == 0.0
    assert (a.ci_low, a.ci_high) == pytest.approx((-z * z / (n + z * z), z * z / (n + z * z)))
    from scipy.stats import norm
    assert a.noninferiority_pvalue == pytest.approx(norm.sf((n * margin / (1 - margin)) ** 0.5))
    assert "no item changed" in a.noninferiority_test
    verdict = decide([a], alpha=0.05, margin=margin).verdict
    assert verdict is (Verdict.PASS if passes else Verdict.INCONCLUSIVE)


def test_a_changed_item_keeps_the_sign_flip_test_alone():
    paired, reps = _task(40, 4, 0.8, 0.8, seed=1)
    a = analyse_repeats(paired, reps, gated=True, alpha=0.05, margin=0.1, seed=3,
                        n_resamples=1000)
    alone = paired_rate_test(reps.baseline, reps.candidate, margin=0.1, alpha=0.05,
                             n_resamples=9999, seed=np.random.default_rng(0))
    assert a.degenerate is None and "no item changed" not in a.noninferiority_test
    assert a.noninferiority_pvalue == pytest.approx(alone.pvalue, abs=0.02)


def _sample(doc_id: int, filter_name: str, resps: list[str]) -> SampleRecord:
    return SampleRecord(task="t", doc_id=doc_id, filter=filter_name,
                        metrics={"exact_match": 1.0}, doc_hash="d", prompt_hash="p", target="7",
                        prediction="7", response=resps[0], prompt="Add:", repeats=len(resps))


def _arm(source: str, filters=("score-first",), k: int = 2) -> ArmSamples:
    return ArmSamples(source, tuple(_sample(d, f, ["7"] * k) for d in range(3) for f in filters))


def test_a_task_logged_with_several_filters_needs_one_named():
    both = ("maj@2", "score-first")
    with pytest.raises(UserError, match=r"several filters \(maj@2, score-first\); name the one"):
        pair_task(_arm("a", both), _arm("b", both), "t", "exact_match")
    assert pair_task(_arm("a", both), _arm("b", both), "t", "exact_match", "maj@2").n == 3


def test_a_repeats_mismatch_names_both_directories():
    with pytest.raises(UserError, match="2 repeat.s. per item in dir-a and 3 in dir-b"):
        pair_task(_arm("dir-a", k=2), _arm("dir-b", k=3), "t", "exact_match")


def test_compare_reads_metric_and_filter_as_lm_eval_names_them():
    assert (metric_of("exact_match,maj@8"), filter_of("exact_match,maj@8")) == (
        "exact_match", "maj@8")
    assert (metric_of("acc"), filter_of("acc")) == ("acc", None)
    assert _repeats([[" 1", " 2", " 3"]]) == 3 and _repeats([" 1"]) == 1


def test_the_paired_items_carry_rates_and_every_sample():
    records = tuple(_sample(d, "strip", ["7"]) for d in range(2))
    paired = replace(_paired([0, 1]), baseline_records=records, candidate_records=records)
    base = _scores("b", {0: ["7", "1"], 1: ["7", "7"]})
    cand = _scores("c", {0: ["7", "7"], 1: ["2", "7"]})
    shown = with_rates(paired, pair_repeats(paired, base, cand, "run"))
    assert shown.baseline.tolist() == [0.5, 1.0] and shown.candidate.tolist() == [1.0, 0.5]
    assert not shown.is_binary
    assert shown.candidate_records[1].prediction == "2 | 7"
    assert shown.candidate_records[1].response == "[repeat 0]  2\n[repeat 1]  7"
