"""`gate.speed` (evals.decide.load_gate) on constructed load curves: a minimum speed-up at a
level met, missed or undecided by its interval, the candidate's SLO-safe concurrency, and
what each does to the verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evals.analyse.load_curve import ArmLoad, LoadCurve
from evals.decide.load_gate import apply_load_gate, evaluate_load_gate
from evals.decide.outcome import Verdict
from evals.plan.config import SpeedGateConfig
from evals.stats.load_curve import LevelSpeedup, SloResult


def _curve(speedup_16=(1.3, 1.2, 1.4), safe=8) -> LoadCurve:
    s, lo, hi = speedup_16
    slo = SloResult(0.15, None, safe, safe, (True,) * 3)
    arm = ArmLoad((), slo, 1.0, 1.0, 10, None)
    return LoadCurve(levels=(1, 4, 16), requests_per_level=8, prompts="p", output_tokens=8,
                     confidence=0.9, slo_ttft_p95_ms=150, slo_tpot_p95_ms=None,
                     arms={"baseline": arm, "candidate": arm},
                     speedups=(LevelSpeedup(1, 2.0, 1.8, 2.2, 0.9), None,
                               LevelSpeedup(16, s, lo, hi, 0.9)),
                     crossover=None, notes=())


@pytest.mark.parametrize("interval, outcome", [
    ((1.3, 1.2, 1.4), "met"), ((1.0, 0.95, 1.05), "missed"), ((1.12, 1.05, 1.2), "undecided")])
def test_min_speedup_at_a_level(interval, outcome):
    result = evaluate_load_gate(_curve(interval), SpeedGateConfig(min_speedup_at={16: 1.1}))
    assert result.outcome == outcome
    assert "concurrency 16 at least 1.1x" in result.checks[0].check


def test_a_failed_level_is_undecided():
    result = evaluate_load_gate(_curve(), SpeedGateConfig(min_speedup_at={4: 1.1}))
    assert result.outcome == "undecided" and "failed" in result.checks[0].measured


def test_slo_concurrency():
    gate = SpeedGateConfig(min_slo_concurrency=16)
    assert evaluate_load_gate(_curve(safe=16), gate).outcome == "met"
    assert evaluate_load_gate(_curve(safe=4), gate).outcome == "missed"
    assert evaluate_load_gate(_curve(safe=None), gate).checks[0].measured == \
        "no level meets the SLO"


def test_the_verdict_follows_the_outcome():
    from evals.decide.verdict import decide

    passing = decide([], alpha=0.05, margin=0.02)
    passing = replace(passing, verdict=Verdict.PASS, reason="all tasks pass")
    missed = evaluate_load_gate(_curve((1.0, 0.95, 1.05)),
                                SpeedGateConfig(min_speedup_at={16: 1.1}))
    out = apply_load_gate(passing, missed)
    assert out.verdict is Verdict.REGRESSION and int(out.exit_code) == 1
    assert "gate.speed missed: speed-up at concurrency 16" in out.reason
    undecided = evaluate_load_gate(_curve((1.12, 1.05, 1.2)),
                                   SpeedGateConfig(min_speedup_at={16: 1.1}))
    assert apply_load_gate(passing, undecided).verdict is Verdict.INCONCLUSIVE
    met = evaluate_load_gate(_curve(), SpeedGateConfig(min_speedup_at={16: 1.1}))
    assert apply_load_gate(passing, met) == passing
