"""The decision rule: Holm across gated tasks for regressions, intersection-union for PASS."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from evals.analyse.task_analysis import analyse_task
from evals.pair.pairing import PairedTask
from evals.decide.verdict import Verdict, decide


def paired(task: str, baseline, candidate) -> PairedTask:
    b, c = np.asarray(baseline, float), np.asarray(candidate, float)
    return PairedTask(task=task, metric="acc", filter="none", doc_ids=tuple(range(len(b))),
                      baseline=b, candidate=c, baseline_records=(), candidate_records=())


def planted(task: str, n: int, correct_to_wrong: int, wrong_to_correct: int, acc: float = 0.8):
    b = np.zeros(n)
    b[: int(acc * n)] = 1
    c = b.copy()
    c[:correct_to_wrong] = 0  # correct -> wrong
    c[int(acc * n): int(acc * n) + wrong_to_correct] = 1  # wrong -> correct
    return paired(task, b, c)


def analyse(p: PairedTask, gated: bool = True, margin: float = 0.03):
    return analyse_task(p, gated=gated, alpha=0.05, margin=margin, seed=1, n_resamples=2000)


@pytest.fixture(autouse=True)
def no_records(monkeypatch):
    # these PairedTasks carry no sample records: skip the label and length analyses
    monkeypatch.setattr("evals.analyse.task_analysis._labels", lambda p: None)
    monkeypatch.setattr("evals.analyse.task_analysis._lengths", lambda p: None)


def test_clear_drop_is_a_regression_naming_the_task():
    result = decide([analyse(planted("a", 1000, 60, 10)), analyse(planted("b", 1000, 5, 5))],
                    alpha=0.05, margin=0.03)
    assert result.verdict is Verdict.REGRESSION and int(result.exit_code) == 1
    assert "a" in result.reason.split("regression in ")[1]
    assert [t.verdict for t in result.tasks] == [Verdict.REGRESSION, Verdict.PASS]


def test_identical_arms_with_many_items_pass():
    result = decide([analyse(planted("a", 2000, 0, 0))], alpha=0.05, margin=0.03)
    assert result.verdict is Verdict.PASS and int(result.exit_code) == 0


def test_few_items_are_inconclusive_and_state_the_mde():
    result = decide([analyse(planted("a", 300, 12, 10))], alpha=0.05, margin=0.03)
    assert result.verdict is Verdict.INCONCLUSIVE and int(result.exit_code) == 3
    assert "smallest drop these 300 items detect with 80% power is" in result.tasks[0].reason
    tiny = decide([analyse(planted("a", 60, 3, 2))], alpha=0.05, margin=0.03)
    assert tiny.verdict is Verdict.INCONCLUSIVE
    assert "no drop is detectable" in tiny.tasks[0].reason and "items are needed" in \
        tiny.tasks[0].reason


def test_holm_adjusts_regression_pvalues_across_gated_tasks_only():
    analyses = [analyse(planted("a", 500, 14, 4)), analyse(planted("b", 500, 12, 4)),
                analyse(planted("c", 500, 30, 2), gated=False)]
    result = decide(analyses, alpha=0.05, margin=0.03)
    raw = [a.regression_pvalue for a in analyses[:2]]
    expected = multipletests(raw, alpha=0.05, method="holm")[1]
    got = [t.regression_pvalue_adjusted for t in result.tasks[:2]]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert result.tasks[2].regression_pvalue_adjusted == analyses[2].regression_pvalue  # alone
    # the non-gated task regressed but cannot fail the run
    assert result.tasks[2].verdict is Verdict.REGRESSION
    assert result.verdict is not Verdict.REGRESSION or any(
        t.verdict is Verdict.REGRESSION for t in result.tasks[:2])


def test_non_binary_metric_uses_paired_t_tests():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.9, 400)
    worse = np.clip(base - 0.1 + rng.normal(0, 0.02, 400), 0, 1)
    analysis = analyse(paired("f1", base, worse))
    assert not analysis.binary and analysis.regression_test.startswith("paired t-test")
    assert decide([analysis], alpha=0.05, margin=0.03).verdict is Verdict.REGRESSION


@pytest.mark.parametrize("n, expected", [(2, Verdict.INCONCLUSIVE), (40, Verdict.INCONCLUSIVE),
                                         (200, Verdict.PASS)])
def test_a_non_binary_metric_with_no_item_changed_is_bounded_as_items_with_no_flip(n, expected):
    # every difference 0: the t-test has no variation (it used to pass any n >= 2); the
    # task is as certain as n 0/1 items with no flip (Tango: +-z^2 / (n + z^2), and the
    # non-inferiority p Phi(-sqrt(n m / (1 - m))))
    from scipy.stats import norm

    scores = np.linspace(0.2, 0.9, n)
    analysis = analyse(paired("f1", scores, scores.copy()))
    z2 = norm.isf(0.05) ** 2
    assert (analysis.ci_low, analysis.ci_high) == pytest.approx((-z2 / (n + z2), z2 / (n + z2)))
    assert analysis.noninferiority_pvalue == pytest.approx(norm.sf((n * 0.03 / 0.97) ** 0.5))
    assert "no item changed" in analysis.noninferiority_test
    assert decide([analysis], alpha=0.05, margin=0.03).verdict is expected


def test_flips_within_the_aa_noise_floor_are_described_as_such():
    p = planted("a", 1000, 20, 18)
    within = analyse_task(p, gated=True, alpha=0.05, margin=0.03, seed=1, n_resamples=500,
                          noise=(0.05, 50))
    beyond = analyse_task(p, gated=True, alpha=0.05, margin=0.03, seed=1, n_resamples=500,
                          noise=(0.01, 10))
    reason_within = decide([within], alpha=0.05, margin=0.03).tasks[0].reason
    reason_beyond = decide([beyond], alpha=0.05, margin=0.03).tasks[0].reason
    assert "do not exceed the A/A noise floor (5.0%" in reason_within
    assert "vs A/A noise floor 1.0%" in reason_beyond


def test_non_gated_tasks_are_screened_with_benjamini_hochberg():
    analyses = [analyse(planted("g", 1000, 5, 5)),
                analyse(planted("s1", 400, 12, 4), gated=False),
                analyse(planted("s2", 400, 9, 5), gated=False),
                analyse(planted("s3", 400, 20, 3), gated=False)]
    result = decide(analyses, alpha=0.05, margin=0.03)
    raw = [a.regression_pvalue for a in analyses[1:]]
    expected = multipletests(raw, alpha=0.05, method="fdr_bh")[1]
    np.testing.assert_allclose([t.regression_pvalue_adjusted for t in result.tasks[1:]],
                               expected, rtol=1e-12)
    assert result.verdict is Verdict.PASS  # screened regressions never fail the run


@pytest.mark.parametrize("name, baseline, candidate, expected", [
    # every item flips correct -> wrong: the "GSM8K 95% -> 0%" shape of a broken MTP
    ("all flip down", [1] * 200, [0] * 200, Verdict.REGRESSION),
    ("all flip down, few items", [1] * 6, [0] * 6, Verdict.REGRESSION),
    ("all flip up", [0] * 200, [1] * 200, Verdict.PASS),
    ("a single item", [1], [0], Verdict.INCONCLUSIVE),
    ("no discordance", [1, 0] * 100, [1, 0] * 100, Verdict.PASS),
    ("both arms constant at 0", [0] * 200, [0] * 200, Verdict.PASS),
    ("both arms constant at 1", [1] * 200, [1] * 200, Verdict.PASS),
])
def test_every_degenerate_table_gets_a_verdict(name, baseline, candidate, expected):
    analysis = analyse(paired(name, baseline, candidate))
    result = decide([analysis], alpha=0.05, margin=0.03)
    assert result.verdict is expected, (name, result.reason)
    assert result.tasks[0].reason  # a sentence, whatever the shape
    if expected is Verdict.INCONCLUSIVE:
        assert analysis.mde is None and analysis.mde_note


def test_floor_ceiling_and_constant_classifier_are_warned():
    from evals.analyse.task_analysis import LabelAnalysis
    from evals.analyse.task_warnings import task_warnings

    floor = analyse(paired("floor", [0] * 50, [0] * 50))
    ceiling = analyse(paired("ceiling", [1] * 50, [1] * 50))
    labels = LabelAnalysis(categories=("positive", "negative", "(other)"),
                           confusion_baseline=(), confusion_candidate=(),
                           per_class_baseline=(), per_class_candidate=(),
                           predicted_share_baseline=(0.5, 0.5, 0.0),
                           predicted_share_candidate=(1.0, 0.0, 0.0), homogeneity_statistic=0.0,
                           homogeneity_pvalue=1.0, homogeneity_df=1, homogeneity_note=None)
    from dataclasses import replace
    constant = replace(analyse(planted("cls", 100, 5, 5)), labels=labels)
    found = task_warnings([floor, ceiling, constant, analyse(planted("fine", 100, 5, 5))])
    assert found == [
        "task floor: both arms score 0 on every item (floor); it cannot detect a drop, so its "
        "PASS says nothing about the candidate",
        "task ceiling: both arms score 1 on every item (ceiling); it can show a drop but no gain",
        "task cls: the candidate predicts `positive` for every item (a constant classifier)"]


def test_pooled_gate_catches_a_spread_drop_and_the_report_says_so(tmp_path):
    """Six tasks each losing a little (no task significant alone): reported without
    `gate.pooled`, a REGRESSION with it; the method section states the pooled test."""
    from evals.report._method import method_section
    from evals.record.run_record import build_summary

    analyses = [analyse(planted(f"t{k}", 1000, 16, 8)) for k in range(6)]
    plain = decide(analyses, alpha=0.05, margin=0.03)
    pooled = decide(analyses, alpha=0.05, margin=0.03, pooled=True)
    assert plain.verdict is not Verdict.REGRESSION and not plain.pooled.gates
    assert plain.pooled.correct_to_wrong == 96 and plain.pooled.wrong_to_correct == 48
    assert pooled.verdict is Verdict.REGRESSION and "pooled regression over 6" in pooled.reason
    summary = build_summary(kind="compare", run_id="r", config={}, analyses=analyses,
                            verdict=pooled, arms={}, sources={}, warnings=[])
    assert "gates the run" in method_section(summary).pooled
