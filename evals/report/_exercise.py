"""The Exercise section: did each optimization the candidate declares actually engage?
Built from the run record's `exercise` (evals.analyse.exercise); runs without it show nothing."""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.run_parts import ArmFaults, ExerciseRecord
from evals.report import _formatting as fmt


@dataclass(frozen=True, slots=True)
class ExerciseRow:
    arm: str
    task: str
    cached: str
    drafted: str
    acceptance: str
    preemptions: str


@dataclass(frozen=True, slots=True)
class FaultRow:
    arm: str
    fault: str
    rate: str
    fired: str


@dataclass(frozen=True, slots=True)
class ExerciseSection:
    declared: str
    kv_cache_dtype: str
    not_exercised: str | None
    rows: tuple[ExerciseRow, ...]
    faults: tuple[FaultRow, ...]


def _share(x) -> str:
    return f"{float(x):.1%}" if fmt.finite(x) else fmt.MISSING


def _count(x) -> str:
    return f"{float(x):,.0f}" if fmt.finite(x) else fmt.MISSING


def exercise_section(data: ExerciseRecord | None,
                     faults: dict[str, ArmFaults] | None = None) -> ExerciseSection | None:
    """The section of a run's exercise record (RunRecord.exercise; a canary's too) and, for a
    run, its faults (RunRecord.faults)."""
    if not data:
        return None
    rows = tuple(ExerciseRow(
        arm=r.arm, task=r.task + ("" if r.gated is not False else " (not gated)"),
        cached=(f"{_share(r.cached_share)} ({_count(r.cached_tokens)} of "
                f"{_count(r.queried_tokens)} tokens)"),
        drafted=_count(r.drafted_tokens), acceptance=_share(r.acceptance),
        preemptions=_count(r.preemptions)) for r in data.tasks)
    faults = tuple(FaultRow(arm=str(arm), fault=f.name, rate=str(f.rate),
                            fired=_count(record.fired.get(f.name, 0)))
                   for arm, record in (faults or {}).items() for f in record.requested)
    kv = ", ".join(f"{arm}: {dtype}" for arm, dtype in data.kv_cache_dtype.items())
    missing = data.not_exercised
    return ExerciseSection(
        declared=", ".join(data.declared) or "none (nothing the baseline lacks)",
        kv_cache_dtype=kv or fmt.MISSING,
        not_exercised=" and ".join(missing) if missing else None, rows=rows, faults=faults)
