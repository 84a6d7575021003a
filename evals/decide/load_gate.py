"""`gate.speed`: the load curve (evals.analyse.load_curve) as a gate step of its own.

* `min_speedup_at: {level: minimum}` - the candidate's speed-up at that level (output tokens
  per second of request time, candidate / baseline): missed when its whole interval lies
  below the minimum, met when its lower end reaches it, undecided otherwise (as
  `gate.min_speedup` is read); a level that did not finish in both arms is undecided.
* `min_slo_concurrency: N` - the candidate's highest concurrency meeting `speed.slo` is at
  least N; below it (or no level meets the SLO) it is missed.

A missed check fails the run (REGRESSION, exit 1); an undecided one turns a PASS into
INCONCLUSIVE.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from evals.analyse.load_curve import LoadCurve
from evals.decide.outcome import Verdict
from evals.decide.verdict import RunVerdict
from evals.plan.config import SpeedGateConfig

Outcome = Literal["met", "missed", "undecided"]


@dataclass(frozen=True, slots=True)
class LoadCheck:
    check: str
    """What was required, in words."""
    measured: str
    """What the sweep measured, in words."""
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class LoadGateResult:
    checks: tuple[LoadCheck, ...]

    @property
    def outcome(self) -> Outcome:
        outcomes = {c.outcome for c in self.checks}
        return "missed" if "missed" in outcomes else (
            "undecided" if "undecided" in outcomes else "met")


def evaluate_load_gate(curve: LoadCurve, gate: SpeedGateConfig) -> LoadGateResult:
    checks = []
    by_level = {c: s for c, s in zip(curve.levels, curve.speedups)}
    for level, minimum in sorted(gate.min_speedup_at.items()):
        required = f"speed-up at concurrency {level} at least {minimum:g}x"
        s = by_level.get(level)
        if s is None:
            checks.append(LoadCheck(required, "not measured (the level failed)", "undecided"))
            continue
        measured = (f"{s.speedup:.2f}x ({curve.confidence:.0%} interval "
                    f"{s.low:.2f}-{s.high:.2f}x)")
        outcome: Outcome = ("met" if s.low >= minimum else
                            "missed" if s.high < minimum else "undecided")
        checks.append(LoadCheck(required, measured, outcome))
    if gate.min_slo_concurrency is not None:
        required = f"candidate meets the SLO up to concurrency {gate.min_slo_concurrency}"
        slo = curve.arms["candidate"].slo
        safe = slo.safe_concurrency if slo is not None else None
        measured = ("no level meets the SLO" if safe is None
                    else f"highest SLO-safe concurrency {safe}")
        checks.append(LoadCheck(required, measured, "met" if safe is not None
                                and safe >= gate.min_slo_concurrency else "missed"))
    return LoadGateResult(tuple(checks))


def apply_load_gate(verdict: RunVerdict, result: LoadGateResult | None) -> RunVerdict:
    """A missed check fails the run; an undecided one turns a PASS into INCONCLUSIVE."""
    if result is None or result.outcome == "met":
        return verdict
    wanted = "missed" if result.outcome == "missed" else "undecided"
    shown = "; ".join(f"{c.check}: {c.measured}" for c in result.checks if c.outcome == wanted)
    if result.outcome == "missed":
        return replace(verdict, verdict=Verdict.REGRESSION,
                       reason=f"{verdict.reason}; gate.speed missed: {shown}")
    if verdict.verdict is Verdict.PASS:
        return replace(verdict, verdict=Verdict.INCONCLUSIVE,
                       reason=f"{verdict.reason}, but gate.speed is undecided: {shown}")
    return verdict
