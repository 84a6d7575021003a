"""Preflight: everything checked before an arm's engine runs an item. Bad input here is a
UserError (exit 2) naming the config file.

- `preflight`: a two-arm run's plan (evals.plan.run_plan.RunPlan) checked before any
  engine starts, by the checks below;
- `check_inputs`: local model folders exist, this CPU can run what the arms ask of vLLM's
  CPU backend (evals.preflight.cpu_support), canary faults can be injected into this vLLM,
  every task name resolves (before any subprocess starts);
- `check_arms_differ`: the arms are not identical (unless an A/A check says so);
- `doctor_checks`: the model doctor (evals.preflight.doctor).

What needs each arm's resolved engine config - the config audit (its comparison is
evals.preflight.audit) and whether vLLM swallowed a requested difference - the run does
beside the first engine start and hands on as data (evals.dispatch.config_audit).
"""

from __future__ import annotations

import json
import os

from evals.hardware import probe
from evals.plan.arm_spec import ArmSpec
from evals.plan.devices import ArmDemand, plan_device_sets, visible_devices
from evals.plan.arm_env import inline_secret_warnings
from evals.plan.decoding import repeats_warnings
from evals.preflight.cpu_support import check_cpu_support
from evals.plan.config import DEFAULT_TASKS_DIR, ABConfig, check_local_models
from evals.plan.run_plan import RunPlan
from evals.preflight.doctor import diagnose_config
from evals.errors import UserError
from evals.paths import ARMS
from evals.runner.task_index import unknown_tasks
from evals.runner.vllm_compat import installed_vllm, release_problem


def preflight(plan: RunPlan, echo=print) -> dict:
    """A two-arm run's plan checked before any engine starts: its inputs (`check_inputs`;
    the devices only where the arms run here), that a sequential run runs locally, that the
    arms differ (or an A/A says they do not), the model doctor. What was found, for the
    record (`doctor_checks`); a problem is a UserError."""
    check_inputs(plan.config, devices=not plan.executor.ray)
    if plan.executor.ray and plan.looks:
        raise UserError(f"{plan.source}: `sequential` needs the local executor (the parent "
                        "answers each look of the running arm); drop `--executor ray`.")
    check_arms_differ(plan.config, plan.specs)
    return doctor_checks(plan.config, echo=echo)


def check_inputs(config: ABConfig, devices: bool = True) -> None:
    """What needs no engine and no vLLM import: the vLLM version, model folders, what this
    CPU can run, whether each arm's engine fits this machine (`devices`: False where arms
    run elsewhere, on Ray, or where a study's device plan checks them by name), fault
    support, task names."""
    check_vllm_release(config)
    check_local_models(config)
    check_cpu_support(config)
    if devices:
        check_devices(config)
    check_fault_support(config)
    check_task_names(config)


def check_devices(config: ABConfig) -> None:
    """Each arm that starts an engine here fits this machine: as many GPUs as its tensor x
    pipeline x data parallel size among those it can see (its CUDA_VISIBLE_DEVICES, else
    the machine's), or on a CPU machine at least a core per rank."""
    gpus = len(probe().gpus)
    for arm in ARMS:
        settings = config.arm(arm)
        if settings.mode not in ("offline", "server"):
            continue  # an endpoint runs elsewhere; `hf` takes what transformers finds
        try:
            demand = ArmDemand.from_engine(arm, settings.engine)
        except ValueError as exc:
            raise UserError(f"{config.source}: arms.{arm}.engine: {exc}") from None
        try:
            pool = visible_devices({**os.environ, **settings.env}, gpus,
                                   sorted(os.sched_getaffinity(0)))
            plan_device_sets([demand], pool, 1)
        except UserError as exc:
            raise UserError(f"{config.source}: {exc}") from None


def check_vllm_release(config: ABConfig) -> None:
    """Arms that run a vLLM engine need a release whose internals the runner was read
    against (evals.runner.vllm_compat.SUPPORTED: request metrics, cache counters, engine
    shutdown, logging hooks); another is one message, exit 2, before any engine starts."""
    if not any(config.arm(name).mode in ("offline", "server") for name in ARMS):
        return
    problem = release_problem(installed_vllm())
    if problem:
        raise UserError(f"{config.source}: {problem}.")


def task_folders(config: ABConfig) -> list[str]:
    """Where the config's tasks are looked for: the bundled tasks/ and its include path."""
    return [str(DEFAULT_TASKS_DIR)] + ([config.include_path] if config.include_path else [])


def check_task_names(config: ABConfig) -> None:
    """Every task name resolves (bundled tasks, the include path, lm-eval's index) before
    any subprocess starts."""
    include = task_folders(config)
    unknown = unknown_tasks([t.name for t in config.tasks], include)
    if unknown:
        name, close = unknown[0]
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UserError(f"{config.source}: lm-eval knows no task named {name!r} (searched "
                        f"lm-eval's tasks and {', '.join(include)}){hint}")


def check_fault_support(config: ABConfig) -> None:
    """Canary faults patch vLLM internals: refuse, before any engine starts, a vLLM release
    the runner does not support (the same check as the engine arms'; within the range the
    plugin checks each patch point when it registers)."""
    if not any(config.arm(name).faults for name in ARMS):
        return
    problem = release_problem(installed_vllm())
    if problem:
        raise UserError(f"{config.source}: faults cannot be injected: {problem}.")


IDENTITY = ("model, adapter, mode, faults, structured output, engine, env and sampling "
            "(chat template, decoding, repeats)")
"""What `arm_identity` compares, in words for the messages that name it."""


def arm_identity(spec: ArmSpec, effective: dict | None = None) -> tuple:
    """What makes two arms the same measurement (IDENTITY): model, adapter, mode, faults,
    structured output, engine and environment. With `effective` (the engine config vLLM resolved for
    the arm) that stands for the requested engine arguments: two arms vLLM resolves alike
    measure the same thing, unless something else here differs."""
    engine = spec.engine if effective is None else effective
    return (spec.model_hash, spec.adapter_hash, spec.mode, json.dumps(spec.faults, sort_keys=True),
            json.dumps(spec.structured_output, sort_keys=True),
            json.dumps(engine, sort_keys=True, default=str), json.dumps(spec.env, sort_keys=True),
            json.dumps(spec.sampling, sort_keys=True))


def check_arms_differ(config: ABConfig, specs: dict[str, ArmSpec]) -> None:
    same = arm_identity(specs["baseline"]) == arm_identity(specs["candidate"])
    if same and not config.expect_identical_arms:
        raise UserError(f"{config.source}: arms.baseline and arms.candidate are identical (same "
                        f"{IDENTITY}); set `expect_identical_arms: true` for an A/A check, or "
                        "change the candidate.")
    if not same and config.expect_identical_arms:
        raise UserError(f"{config.source}: `expect_identical_arms: true`, but the arms differ "
                        f"in one of {IDENTITY}.")


def doctor_checks(config: ABConfig, echo=print) -> dict:
    """Before any arm starts: the model doctor, and a warning for each arm that sets a
    secret inline (evals.plan.secret_env). The doctor stops the run with a UserError on
    errors; what was found goes into the summary."""
    report = diagnose_config(config)
    for line in report.lines():
        echo(line)
    report.check()
    warnings = inline_secret_warnings(config, ARMS) + repeats_warnings(config)
    for line in warnings:
        echo(f"warning: {line}")
    return {"doctor": report.to_dict(), "warnings": report.warning_lines() + warnings}
