"""The run sequence `ab` and `study` share, after their own config checks: reuse what the
run store holds (unless `--fresh`), start the config audit in a thread, run the arms
(whose first engine waits for the audit's go), take the audit's outcome (its stop is
raised here) and put each arm's resolved effective engine config in its manifest."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evals.preflight.checks import (AuditWhileStarting, ResolvedInWorkers,
                                    with_resolved_configs)
from evals.dispatch.arms import fresh_or_reused
from evals.runner.layout import ArmLayout


@dataclass(frozen=True)
class ArmsRun:
    """What the arms left: each arm's layout on disk and manifest, which failed (a study
    goes on without them), where they ran, the audit's outcome."""

    layouts: dict[str, ArmLayout]
    manifests: dict[str, dict]
    audit: Any
    """The audit job's result (evals.preflight.checks.AuditOutcome, or a study's audit)."""
    seconds: float
    failed: dict[str, str] = field(default_factory=dict)
    where: dict = field(default_factory=dict)


Ran = tuple[dict[str, ArmLayout], dict[str, dict], dict[str, str], dict]
"""What a pipeline's `run` returns: layouts, manifests, failed arms, where they ran."""


def preflight_and_run(specs: dict, store, *, fresh: bool, echo, banner: str,
                      audit: Callable[[ResolvedInWorkers | None], Any],
                      run: Callable[[AuditWhileStarting, ResolvedInWorkers | None], Ran],
                      resolve_in_workers: bool = False) -> ArmsRun:
    """Reuse or not, then `run(watch, in_workers)` with `audit(in_workers)` running
    alongside; the arms' manifests with their effective configs. `resolve_in_workers`: the
    arms that run resolve the audit's configs in their own workers
    (evals.preflight.checks.ResolvedInWorkers, planned once reuse has settled which run)."""
    fresh_or_reused(specs, store, fresh, echo)
    in_workers = ResolvedInWorkers(specs) if resolve_in_workers else None
    echo(banner)
    started = time.time()
    watch = AuditWhileStarting(lambda: audit(in_workers))
    layouts, manifests, failed, where = run(watch, in_workers)
    outcome = watch.join()
    seconds = time.time() - started
    echo(f"[evals] arms finished in {seconds:.0f} s; analysing")
    return ArmsRun(layouts=layouts, manifests=with_resolved_configs(manifests, outcome.resolved),
                   audit=outcome, seconds=seconds, failed=failed, where=where)
