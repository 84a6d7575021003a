"""What a two-arm run will do, decided before anything runs: the frozen `RunPlan` that
`evals.pipelines.ab` makes from a config and hands to every later step (preflight, the
run, the analysis's looks, finish, the run store) instead of the config.

The arm specs in it are built by evals.dispatch.arms.arm_specs (each task's inputs are
hashed through lm-eval's task index, evals.runner.task_fingerprint); the rest is read off
the config here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from evals.plan.arm_spec import ArmSpec
from evals.plan.config import ABConfig, GateConfig, SpeedSweepConfig, TaskSpec, deployment_name
from evals.plan.executor import LOCAL, Executor
from evals.plan.schedule import sequential_alpha


@dataclass(frozen=True)
class LookSchedule:
    """A sequential run's looks (`sequential:`): the candidate's worker asks after every
    `chunk` items whether to stop; each task's interim looks spend `alpha`
    (evals.plan.schedule.sequential_alpha) at the gate's non-inferiority `margin`."""

    chunk: int
    alpha: float
    margin: float


@dataclass(frozen=True)
class RunPlan:
    """One two-arm run, planned: where it writes, what each arm runs, what is measured and
    how it is gated, where the arms run. Frozen; its mappings are read-only."""

    config: ABConfig
    """The validated config as loaded: preflight checks it whole (the doctor, what this CPU
    can run, the config audit); later steps read the fields below."""
    run_id: str
    run_dir: Path
    specs: Mapping[str, ArmSpec]
    """Each arm's spec (baseline, candidate, and the A/A rerun under `noise_floor`)."""
    tasks: tuple[TaskSpec, ...]
    gate: GateConfig
    seed: int
    looks: LookSchedule | None
    """The sequential schedule, or None: every item runs."""
    speed: SpeedSweepConfig | None
    """The load sweep of server arms (`speed:`), or None."""
    deployment: str
    """The name the run store tracks the run under (`drift.deployment`, else the name)."""
    executor: Executor = LOCAL
    allow_undeclared: bool = False
    """`--allow-undeclared-diff`: the config audit warns instead of stopping."""

    @property
    def source(self) -> str:
        """The config file, for messages."""
        return self.config.source

    @property
    def task_names(self) -> list[str]:
        return [t.name for t in self.tasks]

    @property
    def config_dump(self) -> dict[str, Any]:
        """The config as the record keeps it (secrets as markers); a fresh copy each time."""
        return json.loads(self.config.model_dump_json())


def make_plan(config: ABConfig, run_id: str, run_dir: Path, specs: Mapping[str, ArmSpec], *,
              executor: Executor = LOCAL, allow_undeclared: bool = False) -> RunPlan:
    """The plan of `config`'s run, given its id, folder and arm specs."""
    looks = None
    if config.sequential:
        looks = LookSchedule(chunk=config.sequential.chunk, alpha=sequential_alpha(config),
                             margin=config.gate.margin)
    return RunPlan(
        config=config, run_id=run_id, run_dir=Path(run_dir), specs=MappingProxyType(dict(specs)),
        tasks=tuple(config.tasks), gate=config.gate, seed=config.seed, looks=looks,
        speed=config.speed, deployment=deployment_name(config), executor=executor,
        allow_undeclared=allow_undeclared)
