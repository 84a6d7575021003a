"""Warm-vs-cold summaries of a cache-stressed arm, and the min-speedup gate on a verdict."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binomtest

from evals.analyse.cache_stress import describe, warm_vs_cold
from evals.pair.pairing import PairedTask
from evals.pair.samples import SampleRecord
from evals.decide.verdict import RunVerdict, Verdict, apply_speed_gate


def _record(doc_id: int, prediction: str) -> SampleRecord:
    return SampleRecord(task="t", doc_id=doc_id, filter="none", metrics={}, doc_hash="d",
                        prompt_hash="p", target="x", prediction=prediction, response=prediction,
                        prompt="q")


def _paired(cold: list[str], warm: list[str], target: str = "a") -> PairedTask:
    return PairedTask(
        task="t", metric="exact_match", filter="none", doc_ids=tuple(range(len(cold))),
        baseline=np.array([float(c == target) for c in cold]),
        candidate=np.array([float(w == target) for w in warm]),
        baseline_records=tuple(_record(i, c) for i, c in enumerate(cold)),
        candidate_records=tuple(_record(i, w) for i, w in enumerate(warm)))


def test_identical_passes_agree():
    check = warm_vs_cold("candidate", _paired(["a", "b", "a"], ["a", "b", "a"]))
    assert check.outputs_changed == 0 and check.disagreement == 0.0
    assert "agree on all 3 items" in describe(check)


def test_changed_answers_are_counted_and_tested_two_sided():
    cold = ["a"] * 40 + ["b"] * 10
    warm = ["b"] * 9 + ["a"] * 31 + ["c"] * 2 + ["b"] * 8  # 9 lost, 0 gained, 2 wrong->wrong
    check = warm_vs_cold("candidate", _paired(cold, warm))
    assert check.outputs_changed == 11
    assert (check.cold_correct_warm_wrong, check.cold_wrong_warm_correct) == (9, 0)
    assert check.pvalue == pytest.approx(binomtest(0, 9, 0.5).pvalue, rel=1e-12)
    assert "changed 11 of 50 answers (22.0%)" in describe(check)


class _Speed:
    def __init__(self, gate, point=1.1, low=0.9, high=1.3, minimum=1.2, factor=1.0):
        self.gate, self.tpot_speedup, self.ci_low, self.ci_high = gate, point, low, high
        self.min_speedup, self.confidence = minimum, 0.9
        self.gate_low, self.gate_high = low / factor, high * factor


PASSED = RunVerdict(Verdict.PASS, (), 0.05, 0.03, "holm", "every gated task is non-inferior")


def test_speed_gate_missed_fails_and_undecided_softens_a_pass():
    missed = apply_speed_gate(PASSED, _Speed("missed", 0.8, 0.7, 0.9))
    assert missed.verdict is Verdict.REGRESSION
    assert missed.reason == ("every gated task is non-inferior; candidate 1.25x slower per output "
                             "token (90% interval 1.11-1.43x), 0.70-0.90x widened by the "
                             "baseline rerun's own speed difference, below gate.min_speedup: at "
                             "least 1.2x faster")
    undecided = apply_speed_gate(PASSED, _Speed("undecided", factor=1.25))
    assert undecided.verdict is Verdict.INCONCLUSIVE
    assert undecided.reason == ("every gated task is non-inferior, but candidate 1.10x faster per "
                                "output token (90% interval 1.11x slower to 1.30x faster), "
                                "0.72-1.62x widened by the baseline rerun's own speed difference "
                                "cannot show gate.min_speedup: at least 1.2x faster")
    alone = _Speed("undecided")
    alone.gate_low = alone.gate_high = None
    assert apply_speed_gate(PASSED, alone).reason.endswith(
        "(no baseline rerun to size two engine starts' difference) cannot show "
        "gate.min_speedup: at least 1.2x faster")
    regression = replace(PASSED, verdict=Verdict.REGRESSION)
    assert apply_speed_gate(regression, _Speed("undecided")) is regression
    assert apply_speed_gate(PASSED, _Speed("met")) is PASSED
    assert apply_speed_gate(PASSED, None) is PASSED
