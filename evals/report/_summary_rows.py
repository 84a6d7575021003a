"""The verdict banner and the per-task summary table: the top of every report."""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.run_record_model import RunRecord, TaskRecord
from evals.report import _formatting as fmt
from evals.report._speed import SpeedChange, speed_change

VERDICTS = ("PASS", "REGRESSION", "INCONCLUSIVE")


def verdict_class(verdict: str) -> str:
    """CSS class of a verdict word; anything unexpected is shown as inconclusive."""
    return verdict.lower() if verdict in VERDICTS else "inconclusive"


@dataclass(frozen=True, slots=True)
class TaskRow:
    task: str
    gated: bool
    metric: str
    n: str
    baseline: str
    candidate: str
    delta: str
    interval: str
    pvalue_adjusted: str
    correct_to_wrong: str
    wrong_to_correct: str
    verdict: str
    verdict_class: str
    reason: str


@dataclass(frozen=True, slots=True)
class GatedTask:
    task: str
    verdict: str
    verdict_class: str


@dataclass(frozen=True, slots=True)
class Banner:
    verdict: str
    verdict_class: str
    reason: str
    run_id: str
    kind: str
    created: str
    exit_code: str
    gated: tuple[GatedTask, ...]
    worst_task: str | None
    worst_delta: str
    worst_interval: str
    margin: str
    alpha: str
    correction: str
    speed: SpeedChange | None
    warnings: tuple[str, ...]
    platform: str
    """The machine the run ran on, in one line (summary.json `platform`)."""


def platform_line(summary: RunRecord) -> str:
    """summary.json `platform` in one line: "AMD EPYC (x86_64, 2 CPUs): AVX-512 (BF16),
    no AMX; no GPU", with "(analysed here; ...)" for a comparison of outputs made
    elsewhere; "not recorded" for a run from before the suite recorded it."""
    record = summary.platform
    if record is None or not record.summary:
        return "not recorded"
    line = record.summary
    if record.role and record.role != "ran the suite":
        line += f" ({record.role})"
    return line


def _items(t: TaskRecord) -> str:
    """Items compared; for a sequential run, of how many the full set holds."""
    looks = t.sequential
    if looks and looks.n_items:
        return f"{fmt.count(t.n)} of {fmt.count(looks.n_items)}"
    return fmt.count(t.n)


def task_rows(summary: RunRecord) -> tuple[TaskRow, ...]:
    rows = []
    for t in summary.tasks:
        rows.append(TaskRow(
            task=t.task, gated=t.gated, metric=str(t.metric or ""),
            n=_items(t), baseline=fmt.mean(t.baseline_mean),
            candidate=fmt.mean(t.candidate_mean), delta=fmt.points(t.delta),
            interval=fmt.points_interval(t.ci_low, t.ci_high),
            pvalue_adjusted=fmt.pvalue(t.regression_pvalue_adjusted),
            correct_to_wrong=fmt.count(t.correct_to_wrong),
            wrong_to_correct=fmt.count(t.wrong_to_correct),
            verdict=t.verdict, verdict_class=verdict_class(t.verdict),
            reason=t.reason or ""))
    return tuple(rows)


def banner(summary: RunRecord) -> Banner:
    tasks = summary.tasks
    gated = [t for t in tasks if t.gated]
    # the worst gated task decides the run; without gated tasks show the worst of all
    pool = [t for t in (gated or tasks) if fmt.finite(t.delta)]
    worst = min(pool, key=lambda t: t.delta) if pool else None
    gate = summary.gate
    return Banner(
        verdict=summary.verdict, verdict_class=verdict_class(summary.verdict),
        reason=summary.reason, run_id=summary.run_id, kind=summary.kind,
        created=summary.created, exit_code=str(summary.exit_code),
        gated=tuple(GatedTask(t.task, t.verdict, verdict_class(t.verdict)) for t in gated),
        worst_task=worst.task if worst else None,
        worst_delta=fmt.points(worst.delta) if worst else fmt.MISSING,
        worst_interval=fmt.points_interval(worst.ci_low, worst.ci_high)
        if worst else fmt.MISSING,
        margin=fmt.unsigned_points(gate.margin), alpha=f"{gate.alpha}",
        correction=gate.correction, speed=speed_change(summary),
        warnings=tuple(summary.warnings), platform=platform_line(summary))
