"""The parent side of arms side by side (evals.dispatch.concurrent): the device plan of this
machine and what an arm may not set itself."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pytest

from evals.errors import UserError
from evals.plan.arm_spec import ArmSpec
from evals.dispatch.concurrent import device_plan, run_side_by_side
from evals.runner.asks import MODEL_READY


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


@pytest.fixture
def one_gpu_machine(monkeypatch):
    monkeypatch.setattr("evals.dispatch.concurrent.gpu_count", lambda: 1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_arms_per_gpu_shares_the_gpu_checking_each_arms_memory(one_gpu_machine):
    fit = {n: spec(n, gpu_memory_utilization=0.45) for n in "ab"}
    plan = device_plan(fit, None, "c.yaml", arms_per_gpu=2)
    assert plan.kind == "gpu" and plan.arms_per_gpu == 2
    assert [a.env for a in plan.assignments] == [{"CUDA_VISIBLE_DEVICES": "0"}] * 2
    assert plan.to_record()["arms_per_gpu"] == 2
    with pytest.raises(UserError, match=r"arm `a` has gpu_memory_utilization 0.9 \(vLLM's default"):
        device_plan({"a": spec("a"), "b": spec("b")}, None, "c.yaml", arms_per_gpu=2)
    assert device_plan({"a": spec("a"), "b": spec("b")}, None, "c.yaml").arms_per_gpu == 1


def test_an_arm_that_sets_its_own_gpus_cannot_share_one(one_gpu_machine):
    own = replace(spec("b", gpu_memory_utilization=0.45), env={"CUDA_VISIBLE_DEVICES": "0"})
    with pytest.raises(UserError, match="arms.b.env sets CUDA_VISIBLE_DEVICES.*without "
                                        "--arms-per-gpu"):
        device_plan({"a": spec("a", gpu_memory_utilization=0.45), "b": own}, 1, "c.yaml",
                    arms_per_gpu=2)


def test_arms_per_gpu_on_a_cpu_machine_is_bad_input(cpu_machine):
    with pytest.raises(UserError, match="--arms-per-gpu is for GPUs; this machine has"):
        device_plan({"a": spec("a"), "b": spec("b")}, None, "c.yaml", arms_per_gpu=2)


def fake_arms(monkeypatch, start_seconds: float, items_seconds: dict | None = None,
              shutdown_seconds: float = 0.0):
    """run_arm replaced by a stand-in that logs its worker's start, waits for its engine turn
    (when it has to), logs that, says its model is ready after `start_seconds` (the
    worker's `[evals]` line), runs its items (`items_seconds[arm]`, default 0.05 s), asks
    to shut its engine down (when it has to), and shuts down in `shutdown_seconds`."""
    log: list[tuple[str, str, float]] = []

    def run_arm(spec, *, echo, answer, devices_env, on_start, engine_turn=None,
                engine_release=None):
        log.append((spec.arm, "start", time.monotonic()))
        if engine_turn is not None:
            engine_turn()
        log.append((spec.arm, "turn", time.monotonic()))
        time.sleep(start_seconds)
        log.append((spec.arm, "ready", time.monotonic()))
        echo(f"[evals] {spec.arm}: {MODEL_READY} {start_seconds:.0f} s")
        time.sleep((items_seconds or {}).get(spec.arm, 0.05))
        log.append((spec.arm, "items done", time.monotonic()))
        if engine_release is not None:
            engine_release()
        log.append((spec.arm, "shutdown", time.monotonic()))
        time.sleep(shutdown_seconds)
        log.append((spec.arm, "ended", time.monotonic()))
        return spec.arm

    monkeypatch.setattr("evals.dispatch.concurrent.run_arm", run_arm)
    return log


def test_arms_sharing_a_gpu_start_their_engines_one_at_a_time(one_gpu_machine, monkeypatch):
    log = fake_arms(monkeypatch, 0.3)
    specs = {n: spec(n, gpu_memory_utilization=0.45) for n in "ab"}
    lines: list[str] = []
    layouts, failed, record = run_side_by_side(device_plan(specs, 2, "c.yaml", arms_per_gpu=2),
                                               specs, lines.append)
    assert layouts == {"a": "a", "b": "b"} and not failed
    when = {(arm, what): t for arm, what, t in log}
    assert when[("b", "start")] < when[("a", "ready")]  # b's worker imports meanwhile
    assert when[("b", "turn")] >= when[("a", "ready")]  # b's engine waited for a's
    assert when[("b", "turn")] < when[("a", "ready")] + 0.2  # ... and no longer
    assert any("b: waits for a's engine to start" in line for line in lines)
    assert [record["arms"][n]["devices"] for n in "ab"] == [["0"], ["0"]]


def test_an_arm_sharing_a_gpu_shuts_down_only_when_no_engine_there_starts(one_gpu_machine,
                                                                          monkeypatch):
    """vLLM stops an engine whose GPU memory grows free while it profiles (seen on the
    H200): `a` finishes its items while `b`'s engine starts, and waits to shut down until
    `b`'s engine is ready; `c`, placed when `a` ends, starts its engine only after `a`'s
    shutdown is over."""
    log = fake_arms(monkeypatch, 0.4, items_seconds={"a": 0.1, "b": 0.6, "c": 0.05},
                    shutdown_seconds=0.3)
    specs = {n: spec(n, gpu_memory_utilization=0.3) for n in "abc"}
    lines: list[str] = []
    layouts, failed, _ = run_side_by_side(device_plan(specs, 2, "c.yaml", arms_per_gpu=2),
                                          specs, lines.append)
    assert layouts == {n: n for n in "abc"} and not failed
    when = {(arm, what): t for arm, what, t in log}
    assert when[("a", "items done")] < when[("b", "ready")]  # a was done while b started
    assert when[("a", "shutdown")] >= when[("b", "ready")]  # ... and shut down after that
    assert any("a: its engine shutdown waits for b's engine start" in line for line in lines)
    assert when[("c", "turn")] >= when[("a", "ended")]  # c's engine after a's shutdown
    # no two engines on the GPU ever start, or start and shut down, at the same time
    phases = sorted([(when[(n, "turn")], when[(n, "ready")]) for n in "abc"]
                    + [(when[(n, "shutdown")], when[(n, "ended")]) for n in "abc"])
    assert all(end <= next_start for (_, end), (next_start, _) in zip(phases, phases[1:]))


def test_arms_on_their_own_gpus_start_together(monkeypatch):
    monkeypatch.setattr("evals.dispatch.concurrent.gpu_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    log = fake_arms(monkeypatch, 0.3)
    specs = {n: spec(n, gpu_memory_utilization=0.45) for n in "ab"}
    lines: list[str] = []
    run_side_by_side(device_plan(specs, 2, "c.yaml", arms_per_gpu=2), specs, lines.append)
    when = {(arm, what): t for arm, what, t in log}
    assert when[("b", "turn")] < when[("a", "ready")]  # GPUs 0 and 1: no wait
    assert not any("waits for" in line for line in lines)


def two_arm_config(tmp_path, candidate: dict):
    from evals.plan.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({
        "name": "c", "model": "m", "tasks": [{"name": "t"}],
        "arms": {"baseline": {"engine": {}}, "candidate": candidate}}), encoding="utf-8")
    return load_config(path)


def machine_with_gpus(monkeypatch, count: int):
    from evals.hardware import Platform

    gpus = tuple(f"NVIDIA H200 {i}" for i in range(count))
    monkeypatch.setattr("evals.preflight.checks.probe",
                        lambda: Platform("x86_64", "x", "", 16, ("avx2",), gpus, ""))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_an_ab_arm_that_needs_more_gpus_than_visible_is_bad_input(tmp_path, monkeypatch):
    from evals.preflight.checks import check_devices

    machine_with_gpus(monkeypatch, 1)
    config = two_arm_config(tmp_path, {"engine": {"tensor_parallel_size": 2}})
    with pytest.raises(UserError, match=r"c\.yaml: arm `candidate` needs 2 GPUs \(tp 2\) but "
                                        r"this machine has 1 GPU \(0\)"):
        check_devices(config)
    machine_with_gpus(monkeypatch, 2)
    check_devices(config)
    # the arm's own CUDA_VISIBLE_DEVICES is what it can see
    hidden = two_arm_config(tmp_path, {"engine": {"tensor_parallel_size": 2},
                                       "env": {"CUDA_VISIBLE_DEVICES": "1"}})
    with pytest.raises(UserError, match="needs 2 GPUs .* has 1 GPU \\(1\\)"):
        check_devices(hidden)


def test_an_ab_arm_needs_a_core_per_rank_on_a_cpu_machine(tmp_path, monkeypatch):
    from evals.preflight.checks import check_devices

    machine_with_gpus(monkeypatch, 0)
    cores = len(os.sched_getaffinity(0))
    check_devices(two_arm_config(tmp_path, {"engine": {"tensor_parallel_size": cores}}))
    with pytest.raises(UserError, match=f"arm `candidate` needs {cores + 1} CPU cores"):
        check_devices(two_arm_config(tmp_path, {"engine": {"tensor_parallel_size": cores + 1}}))
