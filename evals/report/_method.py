"""What was computed and how: the tests per task, the gate, seeds, detectable effects."""

from __future__ import annotations

from dataclasses import dataclass

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


def _mde(t: dict) -> str:
    if fmt.finite(t.get("mde")):
        return f"{fmt.unsigned_points(t['mde'])} pts"
    return str(t.get("mde_note") or fmt.MISSING)


def _pooled(pooled) -> str | None:
    if not isinstance(pooled, dict):
        return None
    role = ("gates the run (in the Holm family with the per-task tests), adjusted p "
            f"{fmt.pvalue(pooled.get('pvalue_adjusted'))}" if pooled.get("gates")
            else "reported only; `gate.pooled: true` makes it gate")
    return (f"pooled over {len(pooled.get('tasks') or [])} gated tasks: "
            f"{fmt.count(pooled.get('correct_to_wrong'))} correct->wrong vs "
            f"{fmt.count(pooled.get('wrong_to_correct'))} wrong->correct, exact stratified "
            f"McNemar p {fmt.pvalue(pooled.get('pvalue'))}; {role}")


def method_section(summary: dict) -> MethodSection:
    gate = summary.get("gate") or {}
    config = summary.get("config") or {}
    config_gate = config.get("gate") if isinstance(config.get("gate"), dict) else {}
    tasks = []
    for t in summary.get("tasks", []):
        tasks.append(TaskMethod(
            task=str(t["task"]), metric=str(t.get("metric", "")),
            filter=str(t.get("filter", "")), gated=bool(t.get("gated", True)),
            n=fmt.count(t.get("n")), regression_test=str(t.get("regression_test", "")),
            regression_pvalue=fmt.pvalue(t.get("regression_pvalue")),
            regression_pvalue_adjusted=fmt.pvalue(t.get("regression_pvalue_adjusted")),
            noninferiority_test=str(t.get("noninferiority_test", "")),
            noninferiority_pvalue=fmt.pvalue(t.get("noninferiority_pvalue")),
            interval_method=str(t.get("ci_method", "")),
            bootstrap_interval=fmt.points_interval(t.get("bootstrap_low"),
                                                   t.get("bootstrap_high")),
            mde=_mde(t), note=str(t.get("degenerate") or "")))
    margin = gate.get("margin")
    return MethodSection(
        alpha=str(gate.get("alpha", fmt.MISSING)),
        margin=f"{fmt.unsigned_points(margin)} pts ({margin})" if fmt.finite(margin)
        else fmt.MISSING,
        correction=str(gate.get("correction", fmt.MISSING)),
        seed=str(config.get("seed", fmt.MISSING)),
        seed_use="lm-eval sampling, few-shot choice and the paired bootstrap"
        if summary.get("kind") == "ab" else "the paired bootstrap (lm-eval ran outside this suite)",
        bootstrap_resamples=str(config_gate.get("bootstrap_resamples", fmt.MISSING)),
        tasks=tuple(tasks),
        sources=tuple((str(k), str(v)) for k, v in (summary.get("sources") or {}).items()),
        warnings=tuple(str(w) for w in summary.get("warnings") or ()),
        pooled=_pooled(summary.get("pooled")),
        suite_version=str(summary.get("suite_version", fmt.MISSING)),
        schema_version=str(summary.get("schema_version", fmt.MISSING)),
        created=str(summary.get("created", fmt.MISSING)), kind=str(summary.get("kind", "")))
