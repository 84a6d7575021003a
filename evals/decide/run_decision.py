"""The decide stage of one comparison: the statistical gate (evals.decide.verdict), then the
gate list (evals.decide.gates): speed, exercise, the drift chart, the log-probability
shift."""

from __future__ import annotations

from functools import partial

from evals.analyse.task_analysis import TaskAnalysis, task_rng
from evals.stats.intervals import interval_level
from evals.analyse.exercise import ExerciseReport
from evals.analyse.load_curve import LoadCurve
from evals.analyse.speed import compare_speed
from evals.decide.drift import DriftInput, apply_chart, chart_tasks, summary_extras
from evals.decide.gates import Gate, run_gates
from evals.decide.load_gate import apply_load_gate, evaluate_load_gate
from evals.decide.verdict import (apply_answer_gate, apply_exercise_gate, apply_shift_gate,
                                  apply_speed_gate, decide)
from evals.dispatch.arm_origins import RERUN
from evals.paths import ARMS
from evals.plan.config import GateConfig


def decide_run(analyses: list[TaskAnalysis], gate: GateConfig, seed: int,
               manifests: dict[str, dict], *, run_id: str, speed: dict[str, dict] | None = None,
               exercise: ExerciseReport | None = None, drift: DriftInput | None = None,
               study_adjusted: dict[str, float] | None = None,
               shifted_tasks: list[tuple[str, float]] = (),
               answer_changes: list[tuple[str, float]] = (),
               load_curve: LoadCurve | None = None):
    """The statistical gate, then the gate list (evals.decide.gates). Returns the verdict, the
    steps and what the gates add to the summary (`speed`, `drift`, `load_gate`)."""
    gates: list[Gate] = []
    extras: dict = {}
    if speed:
        speedup = compare_speed(
            speed.get("baseline", {}), speed.get("candidate", {}),
            spec_decode={a: manifests.get(a, {}).get("spec_decode") for a in ARMS},
            rng=task_rng(seed, "speed"), confidence=interval_level(gate.alpha),
            min_speedup=gate.min_speedup, rerun=speed.get(RERUN))
        extras["speed"] = speedup
        gates.append(Gate("speed", partial(apply_speed_gate, speed=speedup)))
    if load_curve is not None and gate.speed is not None:
        load_gate = evaluate_load_gate(load_curve, gate.speed)
        extras["load_gate"] = load_gate
        gates.append(Gate("load curve", partial(apply_load_gate, result=load_gate)))
    if exercise is not None:
        gates.append(Gate("exercise", partial(apply_exercise_gate, report=exercise)))
    if drift is not None:
        d = drift
        charts = chart_tasks(analyses, d.history, lam=d.lam, L=d.L, run_id=run_id)
        extras.update(summary_extras(d.deployment, d.golden_run, d.arm, charts))
        gates.append(Gate("drift chart", partial(apply_chart, charts=charts)))
    first = decide(analyses, alpha=gate.alpha, margin=gate.margin, correction=gate.correction,
                   pooled=gate.pooled, study_adjusted=study_adjusted)
    if gate.logprob == "fail":
        gates.append(Gate("logprob shift", partial(apply_shift_gate, shifted=shifted_tasks)))
    if gate.answer_distribution == "fail":
        gates.append(Gate("answer distribution",
                          partial(apply_answer_gate, changed=answer_changes)))
    verdict, steps = run_gates(first, gates)
    return verdict, steps, extras
