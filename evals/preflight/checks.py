"""Preflight: everything checked before an arm's engine runs an item. Bad input here is a
UserError (exit 2) naming the config file.

- `preflight`: a two-arm run's plan (evals.plan.run_plan.RunPlan) checked before any
  engine starts - the checks below but the audit, which needs each arm's resolved config;

- `check_inputs`: local model folders exist, this CPU can run what the arms ask of vLLM's
  CPU backend (evals.preflight.cpu_support), canary faults can be injected into this vLLM,
  every task name resolves (before any subprocess starts);
- `check_arms_differ`: the arms are not identical (unless an A/A check says so) - and after
  the run, `check_effective_configs`: vLLM did not swallow the requested difference;
- `doctor_checks`: the model doctor (evals.preflight.doctor);
- `config_audit` / `AuditWhileStarting`: both arms' effective engine configs, resolved
  without an engine (evals.runner.config_resolver), compared by evals.preflight.audit while the
  first arm's engine starts; its worker gets its go only once the audit passed.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from evals.hardware import probe
from evals.plan.arm_spec import ArmSpec
from evals.plan.devices import ArmDemand, plan_device_sets, visible_devices
from evals.plan.arm_env import inline_secret_warnings
from evals.plan.decoding import repeats_warnings
from evals.preflight.audit import audit_resolved
from evals.preflight.cpu_support import check_cpu_support
from evals.plan.config import DEFAULT_TASKS_DIR, ABConfig, check_local_models
from evals.plan.run_plan import RunPlan
from evals.preflight.doctor import diagnose_config
from evals.preflight.recall_geometry import check_trigger_geometry
from evals.errors import UserError
from evals.paths import ARMS
from evals.runner.asks import ENDED, GO, RESOLVE, RESOLVED, Answerer
from evals.runner.config_resolver import (RESOLVABLE_MODES, from_report, recorded_arms,
                                          resolution_env, resolve_arms, resolver_input)
from evals.runner.launch import arm_is_complete
from evals.runner.layout import ArmLayout
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


def trigger_geometry(config: ABConfig, effective: dict, specs: dict, echo=print) -> None:
    """The recall tasks' trigger geometry against the arms vLLM resolved
    (evals.preflight.recall_geometry); a geometry that cannot trigger is a UserError."""
    requested = {arm: dict(spec.engine) for arm, spec in specs.items() if arm in effective}
    for line in check_trigger_geometry(config.source, [t.name for t in config.tasks],
                                       task_folders(config), effective, requested):
        echo(f"[evals] trigger geometry: {line}")


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


def check_effective_configs(config: ABConfig, manifests: dict[str, dict],
                            specs: dict[str, ArmSpec]) -> None:
    """After the run: the arms asked for different engine arguments, but vLLM resolved both
    alike and nothing else of `arm_identity` (model, adapter, mode, faults, structured
    output, env) differs - the comparison would test nothing: exit 2."""
    effective = [manifests[a].get("effective_engine_config") for a in ARMS]
    if config.expect_identical_arms or None in effective or \
            config.arm("baseline").engine == config.arm("candidate").engine:
        return  # only a requested engine difference can be swallowed by vLLM
    if arm_identity(specs["baseline"], effective[0]) == \
            arm_identity(specs["candidate"], effective[1]):
        raise UserError(f"{config.source}: the arms ask for different engine arguments, but vLLM "
                        "ran both with identical effective configs (it ignored or defaulted the "
                        "difference); the comparison would test nothing.")


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


@dataclass(frozen=True)
class AuditOutcome:
    """What a passed config audit hands on: its record for the summary, its warnings, and
    each arm's effective engine config as resolved (a server arm's only record of it)."""

    audit: dict
    warnings: tuple[str, ...]
    resolved: dict


class ResolvedInWorkers:
    """Effective engine configs resolved by the arms' own workers once they have imported
    vLLM (evals.runner.worker answers the parent's "resolve"), which spares the config
    audit a resolver process that imports vLLM again (~9 s of CPU on the 2-core machine).

    `plan(specs)` picks the hosts: every audited offline arm that will run resolves its own
    config, and a host also resolves an audited arm that will not run (reused) when both
    resolve in the same environment. `answerer(arm, other)` wraps an arm's answerer;
    `collect()` waits until each host reported or ended, and returns what was reported."""

    def __init__(self, specs: dict[str, ArmSpec], audited=ARMS):
        self.specs = specs
        self.hosts = self.plan(specs, audited)
        self._found: dict = {}
        self._ended: set[str] = set()
        self._changed = threading.Condition()

    @staticmethod
    def plan(specs: dict[str, ArmSpec], audited=ARMS) -> dict[str, list[str]]:
        running = [a for a in audited if specs[a].mode == "offline" and
                   not arm_is_complete(specs[a])]
        hosts = {a: [a] for a in running}
        for arm in audited:
            if arm in hosts or specs[arm].mode not in RESOLVABLE_MODES:
                continue
            env = resolution_env(specs[arm])
            host = next((h for h in running if resolution_env(specs[h]) == env), None)
            if host is not None:
                hosts[host].append(arm)
        return hosts

    def answerer(self, arm: str, other: Answerer | None) -> Answerer:
        def answer(question: dict):
            kind = question["kind"]
            if kind == RESOLVE and arm in self.hosts:
                return {"arms": [resolver_input(self.specs[a]) for a in self.hosts[arm]]}
            if kind == RESOLVED and arm in self.hosts:
                with self._changed:
                    for name, report in zip(self.hosts[arm], question["reports"]):
                        self._found[name] = from_report(
                            name, report, "the arm's worker" if name == arm else
                            f"arm {arm}'s worker")
                    self._changed.notify_all()
                return None
            if kind == ENDED:
                with self._changed:
                    self._ended.add(arm)
                    self._changed.notify_all()
            return other(question) if other else None
        return answer

    def collect(self) -> dict:
        with self._changed:
            self._changed.wait_for(lambda: all(
                host in self._ended or all(a in self._found for a in arms)
                for host, arms in self.hosts.items()))
            return dict(self._found)


def resolved_or_recorded(specs: dict[str, ArmSpec],
                         in_workers: ResolvedInWorkers | None = None) -> dict:
    """The arms' effective engine configs: from their manifests when every arm is finished
    (e.g. reused) and its worker recorded them, else resolved: by the arms' workers where
    `in_workers` has them, the rest by resolver processes (evals.runner.config_resolver;
    arms that share an environment share one process)."""
    recorded = None
    if all(arm_is_complete(spec) for spec in specs.values()):
        recorded = recorded_arms({arm: ArmLayout(Path(spec.output_dir)).read_manifest()
                                  for arm, spec in specs.items()})
    if recorded:
        return recorded
    found = in_workers.collect() if in_workers is not None else {}
    missing = {arm: spec for arm, spec in specs.items() if arm not in found}
    resolved = {**found, **(resolve_arms(missing) if missing else {})}
    return {arm: resolved[arm] for arm in specs}


def config_audit(config: ABConfig, specs: dict[str, ArmSpec], *,
                 allow_undeclared: bool = False, echo=print,
                 in_workers: ResolvedInWorkers | None = None) -> AuditOutcome:
    """Both arms' effective engine configs, resolved without an engine (by the arms' own
    workers where `in_workers` says so), compared; a stop is a UserError."""
    resolved = resolved_or_recorded({arm: specs[arm] for arm in ARMS}, in_workers)
    audit = audit_resolved(config, resolved, allow_undeclared=allow_undeclared)
    echo(audit.message())
    audit.check()
    trigger_geometry(config, {arm: r.effective for arm, r in resolved.items()}, specs, echo)
    return AuditOutcome(audit=audit.to_dict(), warnings=tuple(audit.warning_lines()),
                        resolved={arm: r.effective for arm, r in resolved.items()})


def plan_audit(plan: RunPlan, *, echo=print,
               in_workers: ResolvedInWorkers | None = None) -> AuditOutcome:
    """`config_audit` of a two-arm run's plan."""
    return config_audit(plan.config, dict(plan.specs), allow_undeclared=plan.allow_undeclared,
                        echo=echo, in_workers=in_workers)


def with_resolved_configs(manifests: dict[str, dict], resolved: dict) -> dict[str, dict]:
    """The arms' manifests; a server arm (its worker cannot see `vllm serve`'s config) gets
    the effective config the audit resolved, as `vllm serve` resolves it."""
    out = {}
    for name, manifest in manifests.items():
        if manifest.get("effective_engine_config") is None and resolved.get(name) is not None:
            manifest = {**manifest, "effective_engine_config": resolved[name],
                        "effective_engine_config_source": "resolved before the run"}
        out[name] = manifest
    return out


class AuditWhileStarting:
    """The config audit in a thread while the first arm's engine starts: that arm's worker
    asks for a go before its first item (evals.runner.asks) and gets it only once the audit
    passed, so nothing is measured before it did, but its ~10 s of resolving overlap the
    engine start."""

    def __init__(self, job):
        self.error: BaseException | None = None
        self.result: AuditOutcome | None = None
        self._thread = threading.Thread(target=self._run, args=(job,), daemon=True)
        self._thread.start()

    def _run(self, job) -> None:
        try:
            self.result = job()
        except BaseException as exc:  # raised in the main thread by join()
            self.error = exc

    def answerer(self, other: Answerer | None) -> Answerer:
        """Answers "go" when the audit has finished; passes other questions on."""
        def answer(question: dict) -> dict:
            if question["kind"] == GO:
                self._thread.join()
                return {"go": self.error is None}
            return other(question) if other else {}
        return answer

    def join(self) -> AuditOutcome:
        """The audit's outcome once it finished; its stop (a UserError) is raised here."""
        self._thread.join()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

