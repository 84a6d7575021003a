"""What was computed and how: the tests per task, the gate, seeds, detectable effects."""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.run_parts import PooledRecord
from evals.record.run_record_model import RunRecord, TaskRecord
from evals.report import _formatting as fmt


@dataclass(frozen=True, slots=True)
class TaskMethod:
    task: str
    metric: str
    filter: str
    gated: bool
    n: str
    regression_test: str
    regression_pvalue: str
    regression_pvalue_adjusted: str
    noninferiority_test: str
    noninferiority_pvalue: str
    interval_method: str
    bootstrap_interval: str
    mde: str
    note: str


@dataclass(frozen=True, slots=True)
class MethodSection:
    alpha: str
    margin: str
    correction: str
    seed: str
    seed_use: str
    bootstrap_resamples: str
    tasks: tuple[TaskMethod, ...]
    sources: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    pooled: str | None
    """The stratified McNemar test over the gated tasks, in words, when it ran."""
    suite_version: str
    schema_version: str
    created: str
    kind: str


def _mde(t: TaskRecord) -> str:
    if fmt.finite(t.mde):
        return f"{fmt.unsigned_points(t.mde)} pts"
    return t.mde_note or fmt.MISSING


def _pooled(pooled: PooledRecord | None) -> str | None:
    if pooled is None:
        return None
    role = ("gates the run (in the Holm family with the per-task tests), adjusted p "
            f"{fmt.pvalue(pooled.pvalue_adjusted)}" if pooled.gates
            else "reported only; `gate.pooled: true` makes it gate")
    return (f"pooled over {len(pooled.tasks)} gated tasks: "
            f"{fmt.count(pooled.correct_to_wrong)} correct->wrong vs "
            f"{fmt.count(pooled.wrong_to_correct)} wrong->correct, exact stratified "
            f"McNemar p {fmt.pvalue(pooled.pvalue)}; {role}")


def method_section(summary: RunRecord) -> MethodSection:
    gate, config = summary.gate, summary.config
    config_gate = config.get("gate") if isinstance(config.get("gate"), dict) else {}
    tasks = []
    for t in summary.tasks:
        tasks.append(TaskMethod(
            task=t.task, metric=t.metric or "", filter=t.filter or "", gated=t.gated,
            n=fmt.count(t.n), regression_test=t.regression_test or "",
            regression_pvalue=fmt.pvalue(t.regression_pvalue),
            regression_pvalue_adjusted=fmt.pvalue(t.regression_pvalue_adjusted),
            noninferiority_test=t.noninferiority_test or "",
            noninferiority_pvalue=fmt.pvalue(t.noninferiority_pvalue),
            interval_method=t.ci_method or "",
            bootstrap_interval=fmt.points_interval(t.bootstrap_low, t.bootstrap_high),
            mde=_mde(t), note=t.degenerate or ""))
    margin = gate.margin
    return MethodSection(
        alpha=str(gate.alpha),
        margin=f"{fmt.unsigned_points(margin)} pts ({margin})" if fmt.finite(margin)
        else fmt.MISSING,
        correction=gate.correction,
        seed=str(config.get("seed", fmt.MISSING)),
        seed_use="lm-eval sampling, few-shot choice and the paired bootstrap"
        if summary.kind == "ab" else "the paired bootstrap (lm-eval ran outside this suite)",
        bootstrap_resamples=str(config_gate.get("bootstrap_resamples", fmt.MISSING)),
        tasks=tuple(tasks),
        sources=tuple(summary.sources.items()),
        warnings=tuple(summary.warnings),
        pooled=_pooled(summary.pooled),
        suite_version=summary.suite_version or fmt.MISSING,
        schema_version=str(summary.schema_version),
        created=summary.created or fmt.MISSING, kind=summary.kind)
