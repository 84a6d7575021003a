"""The verdict banner and the per-task summary table: the top of every report."""

from __future__ import annotations

from dataclasses import dataclass

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


def platform_line(summary: dict) -> str:
    """summary.json `platform` in one line: "AMD EPYC (x86_64, 2 CPUs): AVX-512 (BF16),
    no AMX; no GPU", with "(analysed here; ...)" for a comparison of outputs made
    elsewhere; "not recorded" for a run from before the suite recorded it."""
    record = summary.get("platform")
    if not isinstance(record, dict) or not record.get("summary"):
        return "not recorded"
    line = str(record["summary"])
    if record.get("role") and record["role"] != "ran the suite":
        line += f" ({record['role']})"
    return line


def _items(t: dict) -> str:
    """Items compared; for a sequential run, of how many the full set holds."""
    looks = t.get("sequential")
    if isinstance(looks, dict) and looks.get("n_items"):
        return f"{fmt.count(t.get('n'))} of {fmt.count(looks['n_items'])}"
    return fmt.count(t.get("n"))


def task_rows(summary: dict) -> tuple[TaskRow, ...]:
    rows = []
    for t in summary.get("tasks", []):
        verdict = str(t.get("verdict", "INCONCLUSIVE"))
        rows.append(TaskRow(
            task=str(t["task"]), gated=bool(t.get("gated", True)), metric=str(t.get("metric", "")),
            n=_items(t), baseline=fmt.mean(t.get("baseline_mean")),
            candidate=fmt.mean(t.get("candidate_mean")), delta=fmt.points(t.get("delta")),
            interval=fmt.points_interval(t.get("ci_low"), t.get("ci_high")),
            pvalue_adjusted=fmt.pvalue(t.get("regression_pvalue_adjusted")),
            correct_to_wrong=fmt.count(t.get("correct_to_wrong")),
            wrong_to_correct=fmt.count(t.get("wrong_to_correct")),
            verdict=verdict, verdict_class=verdict_class(verdict),
            reason=str(t.get("reason", ""))))
    return tuple(rows)


def banner(summary: dict) -> Banner:
    tasks = summary.get("tasks", [])
    gated = [t for t in tasks if t.get("gated", True)]
    # the worst gated task decides the run; without gated tasks show the worst of all
    pool = [t for t in (gated or tasks) if fmt.finite(t.get("delta"))]
    worst = min(pool, key=lambda t: t["delta"]) if pool else None
    gate = summary.get("gate") or {}
    verdict = str(summary.get("verdict", "INCONCLUSIVE"))
    return Banner(
        verdict=verdict, verdict_class=verdict_class(verdict),
        reason=str(summary.get("reason", "")), run_id=str(summary.get("run_id", "")),
        kind=str(summary.get("kind", "")), created=str(summary.get("created", "")),
        exit_code=str(summary.get("exit_code", "")),
        gated=tuple(GatedTask(str(t["task"]), str(t.get("verdict", "")),
                              verdict_class(str(t.get("verdict", "")))) for t in gated),
        worst_task=str(worst["task"]) if worst else None,
        worst_delta=fmt.points(worst["delta"]) if worst else fmt.MISSING,
        worst_interval=fmt.points_interval(worst.get("ci_low"), worst.get("ci_high"))
        if worst else fmt.MISSING,
        margin=fmt.unsigned_points(gate.get("margin")), alpha=f"{gate.get('alpha', '')}",
        correction=str(gate.get("correction", "")),
        speed=speed_change(summary),
        warnings=tuple(str(w) for w in summary.get("warnings") or ()),
        platform=platform_line(summary))
