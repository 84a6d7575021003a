"""Where a pipeline's arms run (evals.plan.executor.Executor, a fact of the plan): reaching
a Ray cluster before any arm is sent to it."""

from __future__ import annotations

from evals.plan.executor import LOCAL, Executor

__all__ = ["LOCAL", "Executor", "check_executor"]


def check_executor(executor: Executor) -> None:
    """Ray is installed and its cluster reachable (else one UserError); nothing locally."""
    if executor.ray:
        from evals.dispatch.ray_executor import connect
        connect(executor.address)
