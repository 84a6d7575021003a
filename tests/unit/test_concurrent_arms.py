"""The parent side of arms side by side (evals.run.concurrent): the device plan of this
machine and what an arm may not set itself."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from evals.errors import UserError
from evals.plan.arm_spec import ArmSpec
from evals.run.concurrent import device_plan


def spec(name: str, **engine) -> ArmSpec:
    return ArmSpec(arm=name, model="m", engine=engine, env={}, tasks=(), limit=None,
                   num_fewshot=None, seed=1, include_paths=(), output_dir="", versions={})


@pytest.fixture
def cpu_machine(monkeypatch):
    monkeypatch.setenv("EVALS_FORCE_CPU", "1")


def test_cpu_default_is_one_arm_at_a_time_with_vllms_own_binding(cpu_machine):
    plan = device_plan({"a": spec("a"), "b": spec("b")}, None, "c.yaml")
    assert plan.kind == "cpu" and plan.parallel == 1
    assert all(a.env == {} for a in plan.assignments)
    assert set(plan.pool) == set(os.sched_getaffinity(0))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_parallel_two_on_cpu_gives_each_arm_its_own_cores(cpu_machine):
    plan = device_plan({"a": spec("a"), "b": spec("b")}, 2, "c.yaml")
    first, second = plan.assignments
    assert plan.parallel == 2 and not set(first.devices) & set(second.devices)
    assert first.env["VLLM_CPU_OMP_THREADS_BIND"] != second.env["VLLM_CPU_OMP_THREADS_BIND"]


def test_an_arm_that_sets_the_planners_variables_is_named(cpu_machine):
    own = replace(spec("b"), env={"OMP_NUM_THREADS": "4"})
    with pytest.raises(UserError, match="arms.b.env sets OMP_NUM_THREADS"):
        device_plan({"a": spec("a"), "b": own}, 2, "c.yaml")
    plan = device_plan({"a": spec("a"), "b": own}, 1, "c.yaml")  # one at a time: its own say
    assert all(a.env == {} for a in plan.assignments)


def test_bad_parallel_sizes_and_too_big_arms_are_bad_input(cpu_machine):
    with pytest.raises(UserError, match="arms.a.engine: tensor_parallel_size"):
        device_plan({"a": spec("a", tensor_parallel_size=0)}, 1, "c.yaml")
    cores = len(os.sched_getaffinity(0))
    with pytest.raises(UserError, match=f"arm `a` needs {cores + 1} CPU cores"):
        device_plan({"a": spec("a", tensor_parallel_size=cores + 1)}, 1, "c.yaml")
