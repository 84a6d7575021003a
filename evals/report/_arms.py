"""The two arms side by side: engine configs, versions, model hashes, timings, and per arm
and task whether it ran or was reused from the run store.

A/B runs carry full manifests (`evals.runner.worker`); compare runs only carry the
source directory and lm-eval's own config. Every table is built from whatever keys
either arm has, so a missing key shows as a dash instead of failing the report.
"""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.arm_record import ArmRecord, ArmTaskRecord
from evals.record.run_record_model import RunRecord
from evals.report import _formatting as fmt
from evals.paths import ARMS



@dataclass(frozen=True, slots=True)
class PairRow:
    key: str
    baseline: str
    candidate: str
    differs: bool


@dataclass(frozen=True, slots=True)
class PairTable:
    slug: str
    title: str
    rows: tuple[PairRow, ...]
    total: int
    differing: int
    filterable: bool


@dataclass(frozen=True, slots=True)
class TaskTiming:
    task: str
    wall_baseline: str
    wall_candidate: str
    tokens_baseline: str
    tokens_candidate: str
    rate_baseline: str
    rate_candidate: str


@dataclass(frozen=True, slots=True)
class TaskProvenance:
    """Whether an arm's task ran in this run or was reused from the run store, and why."""

    arm: str
    task: str
    outcome: str
    """"ran" or "reused" (summary `arms.<arm>.tasks.<task>.outcome`)."""
    run: str
    """The run it was reused from ("" when it ran here)."""
    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class ArmsSection:
    kind: str
    tables: tuple[PairTable, ...]
    timings: tuple[TaskTiming, ...]
    provenance: tuple[TaskProvenance, ...] = ()


def flatten(value, prefix: str = "", depth: int = 0) -> dict[str, object]:
    """Nested mappings as {"a.b": leaf}; lists and deeper levels stay whole values."""
    if isinstance(value, dict) and depth < 4:
        out: dict[str, object] = {}
        for key, inner in value.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(inner, dict) and inner:
                out.update(flatten(inner, name, depth + 1))
            else:
                out[name] = inner
        return out
    return {prefix: value} if prefix else {}


def pair_table(slug: str, title: str, baseline, candidate, filterable: bool = False) -> PairTable:
    base = flatten(baseline) if isinstance(baseline, dict) else {}
    cand = flatten(candidate) if isinstance(candidate, dict) else {}
    rows = []
    for key in sorted(set(base) | set(cand)):
        b = fmt.plain(base[key]) if key in base else fmt.MISSING
        c = fmt.plain(cand[key]) if key in cand else fmt.MISSING
        rows.append(PairRow(key, b, c, b != c))
    return PairTable(slug, title, tuple(rows), len(rows), sum(r.differs for r in rows),
                     filterable)


_IDENTITY = ("model", "model_hash", "engine_start_seconds", "wall_seconds_last_run", "source")


def _identity(arm: ArmRecord) -> dict:
    return {k: getattr(arm, k) for k in _IDENTITY if k in arm.model_fields_set}


def _rate(r: ArmTaskRecord) -> str:
    wall, tokens = r.wall_seconds, r.generated_tokens
    if fmt.finite(wall) and fmt.finite(tokens) and wall > 0 and tokens > 0:
        return f"{tokens / wall:,.1f}"
    return fmt.MISSING


def _timings(base: ArmRecord, cand: ArmRecord) -> tuple[TaskTiming, ...]:
    tb, tc = base.tasks or {}, cand.tasks or {}
    out = []
    for task in sorted(set(tb) | set(tc)):
        rb = tb[task] if task in tb else ArmTaskRecord()
        rc = tc[task] if task in tc else ArmTaskRecord()
        out.append(TaskTiming(task, fmt.seconds(rb.wall_seconds), fmt.seconds(rc.wall_seconds),
                              fmt.count(rb.generated_tokens), fmt.count(rc.generated_tokens),
                              _rate(rb), _rate(rc)))
    return tuple(out)


def _platform(arm: ArmRecord) -> dict | None:
    """An arm's machine: its line, its CPU flags and GPUs (summary `arms.<arm>.platform`)."""
    record = arm.platform
    if record is None:
        return None
    return {"machine": record.summary, "CPU flags": " ".join(record.isa or ()),
            "vLLM CPU kernels": record.vllm_cpu_kernels}


def _provenance(arms: dict[str, ArmRecord]) -> tuple[TaskProvenance, ...]:
    rows = []
    for arm, manifest in arms.items():
        for task, record in (manifest.tasks or {}).items():
            if record.outcome is None:
                continue  # a run from before outcomes were recorded
            reused = record.outcome == "reused"
            rows.append(TaskProvenance(
                arm, task, record.outcome, record.reused_run or "",
                (record.reused_from or "") if reused else "",
                (record.reuse_reason or "") if reused else ""))
    return tuple(rows)


def _workarounds(arm: ArmRecord) -> dict | None:
    """The engine workarounds an arm ran with; None (no row) for an unpatched engine."""
    return {"engine_workarounds": ", ".join(arm.engine_workarounds)} \
        if arm.engine_workarounds else None


def arms_section(summary: RunRecord) -> ArmsSection:
    arms = summary.arms
    base, cand = (arms[a] if a in arms else ArmRecord() for a in ARMS)
    specs = [
        ("identity", "Model and source", _identity(base), _identity(cand), False),
        ("versions", "Versions", base.versions, cand.versions, False),
        ("platform", "Platform (where the arm's worker ran)", _platform(base), _platform(cand),
         False),
        ("requested", "Requested engine arguments", base.requested_engine_args,
         cand.requested_engine_args, False),
        ("workarounds", "Engine workarounds (opt-in patches of known vLLM bugs, "
         "evals.plan.engine_workarounds)", _workarounds(base), _workarounds(cand), False),
        ("sampling", "Chat template, decoding settings and repeats (as the arm ran them)",
         base.sampling, cand.sampling, False),
        ("effective", "Effective engine config (as vLLM ran it)",
         base.effective_engine_config, cand.effective_engine_config, True),
        ("generation", "Generation", base.generation, cand.generation, False),
        ("spec-decode", "Speculative decoding counters", base.spec_decode, cand.spec_decode,
         False),
        ("lm-eval", "lm-eval config", base.lm_eval_config, cand.lm_eval_config, True),
    ]
    tables = tuple(t for t in (pair_table(*spec) for spec in specs) if t.rows)
    return ArmsSection(kind=summary.kind, tables=tables,
                       timings=_timings(base, cand), provenance=_provenance(arms))
