"""The config audit as the run does it, beside the first arm's engine start: both arms'
effective engine configs resolved without an engine (by the arms' own workers where they
run here, else by resolver processes, evals.runner.config_resolver), compared
(evals.preflight.audit); the first arm's worker gets its go only once the audit passed, so
nothing is measured before it did. Its outcome (`AuditOutcome`: the audit's record, its
warnings, each arm's effective config) is data the run hands on; after the arms, the
manifests' effective configs are checked for a requested engine difference vLLM resolved
away (`check_effective_configs`). A study's audit (`study_audit`) resolves every arm once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from evals.errors import UserError
from evals.paths import ARMS
from evals.plan.arm_spec import ArmSpec
from evals.plan.config import ABConfig
from evals.plan.run_plan import RunPlan
from evals.plan.study import Study
from evals.preflight.audit import audit_resolved
from evals.preflight.checks import arm_identity, task_folders
from evals.preflight.recall_geometry import check_trigger_geometry
from evals.runner.asks import ENDED, GO, RESOLVE, RESOLVED, Answerer
from evals.runner.config_resolver import (RESOLVABLE_MODES, from_report, recorded_arms,
                                          resolution_env, resolve_arms, resolver_input)
from evals.runner.launch import arm_is_complete
from evals.runner.layout import ArmLayout


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


def trigger_geometry(config: ABConfig, effective: dict, specs: dict, echo=print) -> None:
    """The recall tasks' trigger geometry against the arms vLLM resolved
    (evals.preflight.recall_geometry); a geometry that cannot trigger is a UserError."""
    requested = {arm: dict(spec.engine) for arm, spec in specs.items() if arm in effective}
    for line in check_trigger_geometry(config.source, [t.name for t in config.tasks],
                                       task_folders(config), effective, requested):
        echo(f"[evals] trigger geometry: {line}")


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


@dataclass(frozen=True)
class StudyAudit:
    """Each comparison's audit outcome, and every arm's effective engine config."""

    comparisons: dict[str, AuditOutcome]
    resolved: dict


def study_audit(study: Study, specs: dict, *, allow_undeclared: bool, echo) -> StudyAudit:
    """Every arm's effective engine config, resolved once (arms sharing an environment in one
    process), then each comparison audited as a two-arm config; arms that vLLM resolves to
    the same effective config are a stop."""
    resolved = resolved_or_recorded(specs)
    effective: dict = {}
    for arm, r in resolved.items():
        if r.effective is None:
            continue
        key = arm_identity(specs[arm], r.effective)
        if key in effective:
            raise UserError(f"{study.source}: vLLM resolves arms `{effective[key]}` and `{arm}` "
                            "to the same effective engine config; they would measure the same "
                            "thing twice.")
        effective[key] = arm
    per_arm = {}
    for arm, comparison in study.comparisons.items():
        pair = {"baseline": resolved[study.baseline], "candidate": resolved[arm]}
        audit = audit_resolved(comparison, pair, allow_undeclared=allow_undeclared)
        echo(f"[evals] {study.baseline} vs {arm}: " + audit.message())
        audit.check()
        per_arm[arm] = AuditOutcome(audit=audit.to_dict(), warnings=tuple(audit.warning_lines()),
                                    resolved={role: r.effective for role, r in pair.items()})
    if study.comparisons:
        trigger_geometry(next(iter(study.comparisons.values())),
                         {arm: r.effective for arm, r in resolved.items()}, specs, echo)
    return StudyAudit(per_arm, {arm: r.effective for arm, r in resolved.items()})
