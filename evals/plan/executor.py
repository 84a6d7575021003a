"""Where a run's arms run: this machine (the default) or Ray tasks. A plain fact of the
plan (evals.plan.run_plan.RunPlan); reaching a Ray cluster is the run's
(evals.dispatch.executor.check_executor)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Executor:
    """Where arms run: this machine (`local`, the default) or Ray tasks (`ray`, at `address`,
    None: a local Ray); `parallel`: most arms at once (evals.dispatch.concurrent);
    `arms_per_gpu`: most one-GPU arms sharing one GPU at once (local studies only)."""

    ray: bool = False
    address: str | None = None
    parallel: int | None = None
    arms_per_gpu: int = 1
    shard_tasks: bool = False
    """Ray: one Ray task per arm x task instead of per arm."""


LOCAL = Executor()
