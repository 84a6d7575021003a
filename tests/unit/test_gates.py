"""The gate list: the statistical verdict first, then each gate in order, every step
recorded; and a fake run's summary lists the steps."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

from evals.analyse.exercise import ExerciseReport
from evals.decide.gates import STATISTICAL, Gate, run_gates
from evals.decide.verdict import RunVerdict, Verdict, apply_exercise_gate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))


def _verdict(v: Verdict, reason: str = "all tasks within the margin") -> RunVerdict:
    return RunVerdict(verdict=v, tasks=(), alpha=0.05, margin=0.03, correction="holm",
                      reason=reason)


def _exercise(not_exercised: tuple[str, ...]) -> ExerciseReport:
    return ExerciseReport(declared=("prefix caching",), kv_cache_dtype={}, rows=(),
                          not_exercised=not_exercised, warnings=())


def test_no_gates_leaves_the_statistical_verdict():
    first = _verdict(Verdict.PASS)
    verdict, steps = run_gates(first, [])
    assert verdict is first
    assert [(s.gate, s.verdict, s.changed) for s in steps] == [(STATISTICAL, "PASS", True)]


def test_gates_run_in_order_and_each_step_says_what_it_changed():
    def missed_speed(v: RunVerdict) -> RunVerdict:
        return replace(v, verdict=Verdict.REGRESSION, reason=v.reason + "; too slow")

    gates = [Gate("exercise", partial(apply_exercise_gate, report=_exercise(()))),
             Gate("speed", missed_speed),
             Gate("exercise again", partial(apply_exercise_gate,
                                            report=_exercise(("prefix caching",))))]
    verdict, steps = run_gates(_verdict(Verdict.PASS), gates)
    assert [(s.gate, s.verdict, s.changed) for s in steps] == [
        (STATISTICAL, "PASS", True), ("exercise", "PASS", False),
        ("speed", "REGRESSION", True),
        # a REGRESSION stays one: the not-exercised gate only blocks a PASS
        ("exercise again", "REGRESSION", False)]
    assert verdict.verdict is Verdict.REGRESSION and verdict.reason.endswith("too slow")
    # the same gates in another order: not exercised first turns the PASS INCONCLUSIVE
    verdict, steps = run_gates(_verdict(Verdict.PASS), [gates[2]])
    assert verdict.verdict is Verdict.INCONCLUSIVE and steps[-1].changed
    assert verdict.reason.startswith("not exercised: prefix caching")


def test_the_summary_lists_the_gate_steps(tmp_path):
    from fake_runs import regression_run

    run_dir = regression_run(tmp_path / "run")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["gates"][0] == {"gate": STATISTICAL, "verdict": summary["verdict"],
                                   "changed": True}
    assert summary["gates"][-1]["verdict"] == summary["verdict"]
