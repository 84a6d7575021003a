"""Exercise evidence: did each optimization the candidate declares actually engage?

A PASS says "the optimization costs no accuracy" only if the optimization ran. Prefix
caching with prompts shorter than one KV block never hits; a speculative_config that
vLLM ignored drafts nothing. This module reads what vLLM reported per arm and task (its
counters, collected by the runner around each task: prefix-cache queried and hit tokens,
drafted and accepted tokens, preemptions; the effective KV-cache dtype) and says which
declared optimization never engaged on any gated task. The verdict's exercise gate
(evals.decide.verdict.apply_exercise_gate) turns such a run into INCONCLUSIVE ("not
exercised", exit 3): it cannot PASS.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from evals.paths import ARMS
from evals.plan.config import ABConfig
from evals.plan.run_plan import RunPlan
from evals.plan.optimizations import FP8_KV_CACHE, PREFIX_CACHING, declared_optimizations


@dataclass(frozen=True, slots=True)
class TaskExercise:
    """What vLLM reported for one arm's run of one task (None: not reported)."""

    arm: str
    task: str
    gated: bool
    queried_tokens: float | None
    cached_tokens: float | None
    drafted_tokens: float | None
    accepted_tokens: float | None
    preemptions: float | None

    @property
    def cached_share(self) -> float | None:
        if not self.queried_tokens:
            return None if self.queried_tokens is None else 0.0
        return (self.cached_tokens or 0.0) / self.queried_tokens

    @property
    def acceptance(self) -> float | None:
        return (self.accepted_tokens or 0.0) / self.drafted_tokens if self.drafted_tokens else None


@dataclass(frozen=True, slots=True)
class ExerciseReport:
    declared: tuple[str, ...]
    """Optimizations the candidate turns on that the baseline does not."""
    kv_cache_dtype: dict
    """arm -> the KV-cache dtype vLLM used (effective config), or None."""
    rows: tuple[TaskExercise, ...]
    not_exercised: tuple[str, ...]
    """Declared optimizations that engaged on no gated task of the candidate."""
    warnings: tuple[str, ...]

    def to_dict(self) -> dict:
        rows = [dict(asdict(r), cached_share=r.cached_share, acceptance=r.acceptance)
                for r in self.rows]
        return {"declared": list(self.declared), "kv_cache_dtype": dict(self.kv_cache_dtype),
                "tasks": rows, "not_exercised": list(self.not_exercised),
                "warnings": list(self.warnings)}


def _value(counters: dict | None, name: str) -> float | None:
    if counters is None:
        return None
    return float(counters.get(name, 0.0)) if counters else None


def task_exercise(arm: str, task: str, gated: bool, record: dict) -> TaskExercise:
    counters = record.get("exercise")
    return TaskExercise(
        arm=arm, task=task, gated=gated,
        queried_tokens=_value(counters, "vllm:prefix_cache_queries"),
        cached_tokens=_value(counters, "vllm:prefix_cache_hits"),
        drafted_tokens=_value(counters, "vllm:spec_decode_num_draft_tokens"),
        accepted_tokens=_value(counters, "vllm:spec_decode_num_accepted_tokens"),
        preemptions=_value(counters, "vllm:num_preemptions"))


def _effective_kv_dtype(manifest: dict) -> str | None:
    effective = manifest.get("effective_engine_config") or {}
    value = effective.get("cache_config.cache_dtype")
    return None if value is None else str(value)


def assess(declared: tuple[str, ...], manifests: dict[str, dict],
           gated: dict[str, bool]) -> ExerciseReport:
    """Per arm and task what engaged; which declared optimization never did on the candidate.

    `manifests[arm]["tasks"][task]` are the runner's task records (with "exercise", vLLM's
    counter deltas over that task); `gated` maps task -> gates the verdict."""
    rows = tuple(task_exercise(arm, task, gated.get(task, True), record)
                 for arm, manifest in manifests.items()
                 for task, record in (manifest.get("tasks") or {}).items())
    kv = {arm: _effective_kv_dtype(m) for arm, m in manifests.items()}
    candidate = [r for r in rows if r.arm == "candidate" and r.gated]
    not_exercised, warnings = [], []
    for name in declared:
        if name == FP8_KV_CACHE:
            used = kv.get("candidate")
            if used is not None and not used.startswith("fp8"):
                not_exercised.append(name)
                warnings.append(f"{name} is declared but vLLM ran the candidate with KV-cache "
                                f"dtype {used}")
            continue
        amount = (lambda r: r.cached_tokens) if name == PREFIX_CACHING else \
            (lambda r: r.drafted_tokens)
        what = "cached prompt tokens" if name == PREFIX_CACHING else "drafted tokens"
        reported = [r for r in candidate if amount(r) is not None]
        if not reported:
            if candidate:
                warnings.append(f"{name}: vLLM reported no counters for the candidate, so "
                                "whether it engaged is unknown")
            continue
        idle = [r.task for r in reported if not amount(r)]
        if len(idle) == len(reported):
            not_exercised.append(name)
            warnings.append(f"{name} was not exercised: 0 {what} on every gated task "
                            f"({', '.join(idle)})")
        else:
            for task in idle:
                warnings.append(f"task {task}: {name} did not engage on the candidate "
                                f"(0 {what})")
    if PREFIX_CACHING in declared:
        warnings += unresumed_waves((manifests.get("candidate") or {}).get("tasks") or {},
                                    gated)
    return ExerciseReport(declared=declared, kv_cache_dtype=kv, rows=rows,
                          not_exercised=tuple(not_exercised), warnings=tuple(warnings))


def unresumed_waves(records: dict[str, dict], gated: dict[str, bool]) -> list[str]:
    """A task run in waves (evals.runner.waves) whose later wave got no prefix-cache hits
    never resumed from what the earlier wave cached: the workload's point was missed. A
    wave the task marks fresh (`metadata.fresh_waves`: a new cold start) is not expected to."""
    out = []
    for task, record in records.items():
        for wave in (record.get("waves") or [])[1:]:
            if wave.get("fresh"):
                continue
            hits = (wave.get("exercise") or {}).get("vllm:prefix_cache_hits")
            if hits == 0 and gated.get(task, True):
                out.append(f"task {task}: wave {wave['wave']} got no prefix-cache hits on the "
                           "candidate, so it did not resume from the earlier wave's cache")
    return out


def assess_config(config: ABConfig, manifests: dict[str, dict], *, candidate: str = "candidate",
                  baseline: str | None = "baseline") -> ExerciseReport:
    """`assess` for a config's comparison: what `candidate` turns on that `baseline` does not
    (None: a drift run, whose baseline is a golden run: everything the arm turns on), each
    task gated as the config says."""
    declared = declared_optimizations(config.arm(baseline).engine if baseline else {},
                                      config.arm(candidate).engine)
    return assess(declared, manifests, {t.name: t.gate for t in config.tasks})


def assess_plan(plan: RunPlan, manifests: dict[str, dict]) -> ExerciseReport:
    """`assess` for a two-arm run's plan: what the candidate's engine turns on that the
    baseline's does not, each task gated as planned."""
    declared = declared_optimizations(plan.specs["baseline"].engine,
                                      plan.specs["candidate"].engine)
    return assess(declared, {name: manifests[name] for name in ARMS},
                  {t.name: t.gate for t in plan.tasks})
