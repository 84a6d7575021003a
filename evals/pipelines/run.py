"""The run step `ab` and `study` share, after their plan was checked: reuse what the run
store holds (unless `--fresh`), run the arms with the config audit beside the first engine
start (that arm's worker waits for the audit's go, so nothing is measured before it
passed), and hand on what only the run can tell as data (`RunResult`): each arm's manifest
with the effective engine config vLLM resolved for it, and the audit's outcome."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evals.dispatch.arms import fresh_or_reused, run_arms, run_arms_on_ray
from evals.dispatch.config_audit import (AuditWhileStarting, ResolvedInWorkers,
                                         check_effective_configs, plan_audit,
                                         with_resolved_configs)
from evals.dispatch.executor import check_executor
from evals.plan.run_plan import RunPlan
from evals.runner.asks import Answerer
from evals.runner.layout import ArmLayout


@dataclass(frozen=True)
class RunResult:
    """What the arms left: each arm's layout on disk and manifest (with the effective engine
    config vLLM resolved for it), the audit's outcome, which arms failed (a study goes on
    without them), where they ran."""

    layouts: dict[str, ArmLayout]
    manifests: dict[str, dict]
    audit: Any
    """The audit job's result (evals.dispatch.config_audit.AuditOutcome, or a study's audit)."""
    seconds: float
    failed: dict[str, str] = field(default_factory=dict)
    where: dict = field(default_factory=dict)

    @property
    def effective(self) -> dict[str, dict | None]:
        """Each arm's effective engine config (None where none was recorded or resolved)."""
        return {name: m.get("effective_engine_config") for name, m in self.manifests.items()}


Ran = tuple[dict[str, ArmLayout], dict[str, dict], dict[str, str], dict]
"""What a pipeline's `run` returns: layouts, manifests, failed arms, where they ran."""


def run_with_audit(specs: dict, store, *, fresh: bool, echo, banner: str,
                   audit: Callable[[ResolvedInWorkers | None], Any],
                   run: Callable[[AuditWhileStarting, ResolvedInWorkers | None], Ran],
                   resolve_in_workers: bool = False) -> RunResult:
    """Reuse or not, then `run(watch, in_workers)` with `audit(in_workers)` running
    alongside; the arms' manifests with their effective configs. `resolve_in_workers`: the
    arms that run resolve the audit's configs in their own workers
    (evals.dispatch.config_audit.ResolvedInWorkers, planned once reuse has settled which run)."""
    fresh_or_reused(specs, store, fresh, echo)
    in_workers = ResolvedInWorkers(specs) if resolve_in_workers else None
    echo(banner)
    started = time.time()
    watch = AuditWhileStarting(lambda: audit(in_workers))
    layouts, manifests, failed, where = run(watch, in_workers)
    outcome = watch.join()
    seconds = time.time() - started
    echo(f"[evals] arms finished in {seconds:.0f} s; analysing")
    return RunResult(layouts=layouts, manifests=with_resolved_configs(manifests, outcome.resolved),
                     audit=outcome, seconds=seconds, failed=failed, where=where)


def run_plan(plan: RunPlan, store, *, fresh: bool = False, echo=print,
             answers: dict[str, Answerer] | None = None) -> RunResult:
    """A two-arm plan's run: its Ray cluster reached (`--executor ray`), then the arms, each
    in turn here (`answers`: the parent's answers to an arm's worker, e.g. a sequential
    candidate's looks) or as Ray tasks. The audit resolves both arms while the first engine
    starts: locally the arms' own workers resolve their configs for it (no vLLM import of
    its own); a Ray task cannot answer, so there the audit's resolver processes do and the
    audit goes first. A requested engine difference that vLLM resolved away stops the run
    (evals.dispatch.config_audit.check_effective_configs)."""
    check_executor(plan.executor)
    specs = dict(plan.specs)

    def run(audit, in_workers):
        if plan.executor.ray:  # a Ray task cannot wait for the audit's go: the audit goes first
            audit.join()
            layouts, manifests, where = run_arms_on_ray(specs, echo, plan.executor)
            echo(f"[evals] arms ran on Ray: {where['arms']}")
            return layouts, manifests, {}, where
        layouts, manifests = run_arms(plan, specs, echo, answers, audit, in_workers)
        return layouts, manifests, {}, {}

    ran = run_with_audit(
        specs, store, fresh=fresh, echo=echo, run=run, resolve_in_workers=not plan.executor.ray,
        banner=f"[evals] run {plan.run_dir.name}: {len(plan.tasks)} task(s), arms run one at "
               "a time",
        audit=lambda in_workers: plan_audit(plan, echo=echo, in_workers=in_workers))
    check_effective_configs(plan.config, ran.manifests, specs)
    return ran
