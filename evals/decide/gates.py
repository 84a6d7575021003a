"""The run's verdict, gate by gate.

The statistical gate (`evals.decide.verdict.decide`: the paired tests of every task, Holm or BH
across tasks, the pooled test) gives the first verdict. The run's other gates follow in a
fixed order, each given the verdict so far:

1. `speed`: a config's `min_speedup` (evals.decide.verdict.apply_speed_gate);
2. `exercise`: a declared optimization that never engaged cannot PASS
   (evals.decide.verdict.apply_exercise_gate, on the evidence of evals.analyse.exercise);
3. `drift chart`: an EWMA alarm at this drift run is a REGRESSION (evals.decide.drift).

Each step is recorded (`GateStep`); the summary lists them under `gates`, so a reader sees
which gate made the verdict what it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from evals.decide.verdict import RunVerdict

STATISTICAL = "statistical"


@dataclass(frozen=True, slots=True)
class Gate:
    name: str
    apply: Callable[[RunVerdict], RunVerdict]


@dataclass(frozen=True, slots=True)
class GateStep:
    gate: str
    verdict: str
    """The verdict after this gate."""
    changed: bool
    """Whether this gate changed the verdict or its reason."""


def run_gates(first: RunVerdict, gates: Sequence[Gate]
              ) -> tuple[RunVerdict, tuple[GateStep, ...]]:
    """The verdict after every gate, and one step per gate (the statistical one first)."""
    steps = [GateStep(STATISTICAL, first.verdict.value, True)]
    verdict = first
    for gate in gates:
        after = gate.apply(verdict)
        steps.append(GateStep(gate.name, after.verdict.value, after != verdict))
        verdict = after
    return verdict, tuple(steps)
