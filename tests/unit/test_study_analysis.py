"""A study's analysis downstream of the runner: one Holm family over every arm and task,
the interaction of two optimizations per task, and the study page and matrix.

References are independent of the code under test: statsmodels' Holm, and the sign-flip
null distribution enumerated over every sign pattern."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from evals.analyse.task_analysis import analyse_task
from synthetic_runs import PlantedTask, paired_task, study_record
from evals.analyse.interaction import task_interaction
from evals.decide.verdict import decide, study_family
from evals.pair.pairing import PairedTask
from evals.plan.study import Cell
from evals.record.study_record import StudyRecord
from evals.report.study import build_study_page, render_study, render_study_markdown, \
    render_study_table

CELL = Cell("prefix_caching", "on", "decoding", "mtp", neither="baseline",
            first_only="prefix_caching=on", second_only="decoding=mtp",
            both="prefix_caching=on+decoding=mtp")


def paired(task: str, base, cand, doc_ids=None) -> PairedTask:
    base, cand = np.asarray(base, float), np.asarray(cand, float)
    ids = tuple(doc_ids if doc_ids is not None else range(len(base)))
    return PairedTask(task, "acc", "none", ids, base, cand, (), (), binary=True)


def test_study_family_is_holm_over_every_arm_and_task():
    p = {("a", "t1"): 0.01, ("a", "t2"): 0.04, ("b", "t1"): 0.03, ("b", "t2"): 0.2,
         ("c", "t1"): 0.005}
    adjusted = study_family(p, alpha=0.05)
    reference = multipletests(list(p.values()), alpha=0.05, method="holm")[1]
    assert [adjusted[k] for k in p] == pytest.approx(list(reference))
    assert study_family(p, alpha=0.05, correction="none") == p


def test_decide_uses_the_study_adjusted_p_values():
    task = PlantedTask("t", n=400, correct_to_wrong=14, wrong_to_correct=2)
    analysis = analyse_task(paired_task(task, np.random.default_rng(3)), gated=True,
                            alpha=0.05, margin=0.02, seed=1, n_resamples=200)
    assert analysis.regression_pvalue < 0.05
    own = decide([analysis], alpha=0.05, margin=0.02)
    assert own.tasks[0].regression_pvalue_adjusted == pytest.approx(analysis.regression_pvalue)
    study = decide([analysis], alpha=0.05, margin=0.02, study_adjusted={"t": 0.9})
    assert study.tasks[0].regression_pvalue_adjusted == 0.9
    assert own.tasks[0].verdict.value == "REGRESSION"
    assert study.tasks[0].verdict.value != "REGRESSION"


def _sign_flip_pvalue(contrast: np.ndarray) -> float:
    """P(sum of randomly signed contrasts <= observed), over all 2^k sign patterns."""
    nonzero = contrast[contrast != 0]
    observed = contrast.sum()
    sums = [np.dot(signs, np.abs(nonzero))
            for signs in itertools.product((-1, 1), repeat=len(nonzero))]
    return float(np.mean(np.array(sums) <= observed))


def test_interaction_matches_a_brute_force_sign_flip_reference():
    rng = np.random.default_rng(11)
    n = 40
    y00 = rng.integers(0, 2, n)
    y10, y01 = y00.copy(), y00.copy()
    y10[rng.choice(n, 3, replace=False)] ^= 1
    y01[rng.choice(n, 3, replace=False)] ^= 1
    y11 = y00.copy()
    y11[rng.choice(n, 9, replace=False)] = 0  # the combination loses items of its own
    # the arms' pairings list documents in different orders: alignment is by document
    order = rng.permutation(n)
    pairs = {"first_only": paired("t", y00, y10),
             "second_only": paired("t", y00[order], y01[order], doc_ids=order),
             "both": paired("t", y00, y11)}
    verdicts = {CELL.first_only: "PASS", CELL.second_only: "PASS", CELL.both: "REGRESSION"}
    result = task_interaction(CELL, pairs, alpha=0.05, verdicts=verdicts)
    contrast = y11 - y10 - y01 + y00
    assert result.n == n
    assert result.contrast == pytest.approx(contrast.mean())
    assert result.pvalue == pytest.approx(_sign_flip_pvalue(contrast))
    assert result.accuracy["both"] == pytest.approx(y11.mean())
    low, high = result.ci_low, result.ci_high
    assert low < result.contrast < high
    if result.significant:
        assert "appears only with the combination" in result.sentence
    assert "prefix_caching=on alone" in result.sentence


def test_a_combination_that_only_adds_its_parts_shows_no_interaction():
    y00 = np.array([1, 1, 1, 1, 0, 0, 0, 0] * 10)
    y10 = y00.copy()
    y10[:8] = 0  # the first optimization alone loses 8 items...
    y01 = y00.copy()
    y11 = y10.copy()  # ...and with the second on, the same 8: no interaction
    pairs = {"first_only": paired("t", y00, y10), "second_only": paired("t", y00, y01),
             "both": paired("t", y00, y11)}
    result = task_interaction(CELL, pairs, alpha=0.05,
                              verdicts={CELL.first_only: "REGRESSION",
                                        CELL.both: "REGRESSION"})
    assert result.contrast == 0 and result.pvalue == 1.0 and not result.significant
    assert "no interaction is shown" in result.sentence


def test_study_page_shows_the_matrix_and_the_interaction_escaped():
    page = build_study_page(StudyRecord.model_validate(study_record()))
    (row, failed) = page.rows
    assert row.cells[0].delta == "-10.0" and row.cells[0].interval == "[-13.0, -7.0]"
    assert row.cells[0].flips == "50 / 2"
    assert row.speed == "candidate 2.00x slower per output token (interval 1.60-2.50x)"
    assert row.report_href == "comparisons/prefix_caching%3Don%2Bdecoding%3Dmtp/report.html"
    assert failed.cells == (None,) and failed.report_href is None
    html = render_study(page)
    assert "<script>x</script>" not in html and "&lt;script&gt;" in html
    assert "t&lt;b&gt;" in html and "<b>" not in html.split("<main>")[1].replace("<br>", "")
    assert 'id="interactions"' in html and "appears only with the combination" in html
    markdown = render_study_markdown(page)
    assert "| prefix_caching=on+decoding=mtp |" in markdown.replace("\\", "")
    table = render_study_table(StudyRecord.model_validate(study_record()))
    assert "STUDY VERDICT: REGRESSION" in table and "-10.0 [-13.0, -7.0] REGRESSION" in table
