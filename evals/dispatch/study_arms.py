"""The run stage of a study: every arm once, side by side where the devices allow or as Ray
tasks; a failed arm is recorded and the others go on."""

from __future__ import annotations

from evals.errors import UserError
from evals.plan.study import Study
from evals.dispatch.config_audit import AuditWhileStarting
from evals.dispatch.arms import manifests_of
from evals.dispatch.concurrent import device_plan, run_side_by_side
from evals.plan.executor import Executor
from evals.dispatch.ray_executor import submit_arms
from evals.runner.layout import ArmLayout


def run_study_arms(study: Study, specs: dict, echo, audit: AuditWhileStarting,
                   executor: Executor):
    """Each arm once, side by side where the devices allow (evals.dispatch.concurrent) or as Ray
    tasks. A failed arm is recorded and the others go on; the audit's stop is raised when the
    first arm ends, before any other arm starts (with `--parallel 1`), or, on Ray, before
    any arm is submitted."""
    if executor.ray:
        audit.join()
        try:
            dirs, failed, where = submit_arms(specs, address=executor.address,
                                              parallel=executor.parallel, echo=echo,
                                              shard_tasks=executor.shard_tasks)
        except UserError as exc:
            raise UserError(f"{study.source}: {exc}") from None
        layouts = {name: ArmLayout(path) for name, path in dirs.items()}
        return layouts, manifests_of(layouts, specs), failed, where
    plan = device_plan(specs, executor.parallel, study.source, executor.arms_per_gpu)
    if plan.parallel > 1:
        sharing = f" ({plan.arms_per_gpu} arms per GPU)" if plan.arms_per_gpu > 1 else ""
        echo(f"[evals] up to {plan.parallel} arms at once on {plan.kind.upper()} devices "
             f"{','.join(map(str, plan.pool))}{sharing}")
    try:
        layouts, failed, devices = run_side_by_side(plan, specs, echo, audit.answerer(None),
                                                    audit.join)
    except UserError as exc:
        raise UserError(exc if str(exc).startswith(study.source) else
                        f"{study.source}: {exc}") from None
    return layouts, manifests_of(layouts, specs), failed, devices
