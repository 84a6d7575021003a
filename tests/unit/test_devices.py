"""The device-set planner (evals.plan.devices) and its simulation: arms running at once never
share a device or exceed the pool, parallel=1 is the config's order one after another, arms
that do not fit wait, the scheduler never leaves a waiting arm idle when it fits, and the
simulated makespan matches a schedule worked out by hand."""

from __future__ import annotations

import ast
import json
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from evals.errors import UserError
from evals.plan.device_simulation import simulate
from evals.plan.devices import (
    ArmDemand,
    Scheduler,
    devices_needed,
    plan_device_sets,
    visible_devices,
)

GPUS8 = visible_devices({}, 8, [])


def tp(name: str, size: int, **more) -> ArmDemand:
    return ArmDemand.from_engine(name, {"tensor_parallel_size": size, **more})


def starts(result) -> dict[str, float]:
    return {t.arm: t.start for t in result.arms}


def parse_vllm_id_list(text: str) -> list[int]:
    """vLLM's reading of one rank's core list (vllm/utils/cpu_resource_utils.parse_id_list)."""
    out = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


# --- what an arm needs, what the machine has ----------------------------------------------

def test_devices_needed_multiplies_the_parallel_sizes_missing_ones_count_as_one():
    assert devices_needed({}) == 1
    assert devices_needed({"tensor_parallel_size": 2, "dtype": "bfloat16"}) == 2
    assert devices_needed({"tensor_parallel_size": 2, "pipeline_parallel_size": 2,
                           "data_parallel_size": 3}) == 12


@pytest.mark.parametrize("value", [0, -2, "2", 2.0, True, None])
def test_devices_needed_rejects_anything_but_a_positive_whole_number(value):
    with pytest.raises(ValueError, match="pipeline_parallel_size"):
        devices_needed({"tensor_parallel_size": 2, "pipeline_parallel_size": value})


def test_gpu_ids_come_from_cuda_visible_devices_not_from_zero():
    assert GPUS8.kind == "gpu" and GPUS8.ids == tuple("01234567")
    pool = visible_devices({"CUDA_VISIBLE_DEVICES": "2, 3,6,7"}, 4, [0, 1])
    assert pool.ids == ("2", "3", "6", "7")
    uuids = "GPU-5c2b1d7e-aaaa,GPU-9f00c3b1-bbbb"
    assert visible_devices({"CUDA_VISIBLE_DEVICES": uuids}, 2, []).ids == tuple(uuids.split(","))


@pytest.mark.parametrize("listed, message", [("0,,1", "empty entry"), ("1,1", "twice"),
                                             ("0,1,2,9", "names 4 devices but CUDA can use 3")])
def test_a_bad_cuda_visible_devices_is_a_user_error(listed, message):
    with pytest.raises(UserError, match=message):
        visible_devices({"CUDA_VISIBLE_DEVICES": listed}, 3, [])


def test_without_gpus_the_pool_is_the_cpu_affinity():
    for gpu_count in (None, 0):
        pool = visible_devices({"CUDA_VISIBLE_DEVICES": "0"}, gpu_count, [3, 1, 2, 0])
        assert pool.kind == "cpu" and pool.ids == (0, 1, 2, 3)
    with pytest.raises(UserError, match="CPU affinity"):
        visible_devices({}, None, [])


def test_hyperthread_siblings_count_once_when_the_topology_is_given():
    # 4 physical cores, siblings numbered 4 apart as Linux does on x86
    physical = {cpu: (0, cpu % 4) for cpu in range(8)}
    assert visible_devices({}, None, range(8), physical).ids == (0, 1, 2, 3)
    assert visible_devices({}, None, [1, 5, 6], physical).ids == (1, 6)


# --- plans --------------------------------------------------------------------------------

def test_four_tp2_arms_on_eight_gpus_all_run_at_once_on_disjoint_pairs():
    plan = plan_device_sets([tp(n, 2) for n in ("base", "prefix", "mtp", "both")], GPUS8, None)
    devices = {a.arm: a.devices for a in plan.assignments}
    assert devices == {"base": ("0", "1"), "prefix": ("2", "3"), "mtp": ("4", "5"),
                       "both": ("6", "7")}
    assert plan.assignments[2].env == {"CUDA_VISIBLE_DEVICES": "4,5"}
    assert set(starts(simulate(plan, dict.fromkeys(devices, 100.0))).values()) == {0.0}


def test_four_tp4_arms_on_eight_gpus_run_in_two_waves():
    plan = plan_device_sets([tp(n, 4) for n in "abcd"], GPUS8, None)
    assert starts(simulate(plan, dict.fromkeys("abcd", 1.0))) == {"a": 0, "b": 0, "c": 1, "d": 1}
    assert [a.devices for a in plan.assignments] == [tuple("0123"), tuple("4567")] * 2


def test_three_tp4_arms_on_six_gpus_run_one_at_a_time():
    pool = visible_devices({}, 6, [])
    result = simulate(plan_device_sets([tp(n, 4) for n in "abc"], pool, None),
                      {"a": 3.0, "b": 2.0, "c": 1.0})
    assert starts(result) == {"a": 0, "b": 3, "c": 5}
    assert result.makespan == result.sequential == 6.0 and result.ratio == 1.0


def test_a_subset_of_visible_gpus_is_what_the_arms_get():
    pool = visible_devices({"CUDA_VISIBLE_DEVICES": "2,3,6,7"}, 4, [])
    plan = plan_device_sets([tp("a", 2), tp("b", 2)], pool, None)
    assert [a.env for a in plan.assignments] == [{"CUDA_VISIBLE_DEVICES": "2,3"},
                                                 {"CUDA_VISIBLE_DEVICES": "6,7"}]


def test_an_arm_larger_than_the_machine_is_a_user_error_naming_it():
    big = tp("mtp+prefix", 4, pipeline_parallel_size=2, data_parallel_size=2)
    with pytest.raises(UserError) as caught:
        plan_device_sets([tp("baseline", 2), big], GPUS8, None)
    message = str(caught.value)
    for part in ("`mtp+prefix`", "needs 16 GPUs", "tp 4 x pp 2 x dp 2", "8 GPUs (0,1,2,3,4,5,6,7)"):
        assert part in message
    with pytest.raises(UserError) as caught:
        plan_device_sets([tp("a", 1), tp("b", 4)], visible_devices({}, None, [0, 1]), None)
    assert str(caught.value).startswith("arm `b` needs 4 CPU cores (tp 4, at least one core per "
                                        "rank) but this machine has 2 CPU cores (0-1);")


@pytest.mark.parametrize("parallel", [0, -1, 1.5, True])
def test_parallel_must_be_one_or_more(parallel):
    with pytest.raises(UserError, match="parallel"):
        plan_device_sets([tp("a", 1)], GPUS8, parallel)


def test_parallel_one_is_the_config_order_one_after_another():
    rng = random.Random(7)
    arms = [tp(f"arm{i}", rng.choice([1, 2, 4, 8])) for i in range(7)]
    durations = {a.name: rng.uniform(1, 50) for a in arms}
    result = simulate(plan_device_sets(arms, GPUS8, 1), durations)
    assert [t.arm for t in result.arms] == [a.name for a in arms]
    for before, after in zip(result.arms, result.arms[1:]):
        assert after.start == before.end
    assert result.makespan == pytest.approx(sum(durations.values()))
    assert all(t.devices == tuple("01234567")[:len(t.devices)] for t in result.arms)


def test_parallel_caps_the_arms_running_at_once():
    plan = plan_device_sets([tp(n, 2) for n in "abcd"], GPUS8, 2)
    result = simulate(plan, {"a": 4.0, "b": 1.0, "c": 1.0, "d": 1.0})
    assert starts(result) == {"a": 0, "b": 0, "c": 1, "d": 2}
    assert result.makespan == 4.0


def test_cpu_cores_are_split_evenly_into_contiguous_blocks():
    pool = visible_devices({}, None, range(10))
    plan = plan_device_sets([ArmDemand(n, 1) for n in "abc"], pool, None)
    envs = {a.arm: a.env for a in plan.assignments}
    assert envs["a"] == {"VLLM_CPU_OMP_THREADS_BIND": "0-2", "OMP_NUM_THREADS": "3"}
    assert envs["c"] == {"VLLM_CPU_OMP_THREADS_BIND": "6-8", "OMP_NUM_THREADS": "3"}  # 9 idle
    # a tensor-parallel CPU arm: one core list per rank, as vLLM reads them
    plan = plan_device_sets([ArmDemand("a", 1), tp("b", 2)], visible_devices({}, None, range(8)), None)
    assert plan.assignments[1].env == {"VLLM_CPU_OMP_THREADS_BIND": "4-5|6-7", "OMP_NUM_THREADS": "2"}


def test_cpu_core_lists_read_back_as_vllm_parses_them():
    cores = [0, 1, 2, 3, 8, 9, 10, 12, 13, 20, 21, 22, 23, 24, 30, 31]
    plan = plan_device_sets([ArmDemand("a", 1), tp("b", 2)], visible_devices({}, None, cores), None)
    for a in plan.assignments:
        ranks = a.env["VLLM_CPU_OMP_THREADS_BIND"].split("|")
        assert [c for r in ranks for c in parse_vllm_id_list(r)] == list(a.devices)
    assert plan.assignments[0].env["VLLM_CPU_OMP_THREADS_BIND"] == "0-3,8-10,12"


def test_cpu_blocks_follow_parallel_and_one_at_a_time_leaves_binding_to_vllm():
    pool = visible_devices({}, None, range(8))
    plan = plan_device_sets([ArmDemand(n, 1) for n in "abcd"], pool, 2)
    assert [a.devices for a in plan.assignments] == [(0, 1, 2, 3), (4, 5, 6, 7)] * 2
    plan = plan_device_sets([ArmDemand(n, 1) for n in "ab"], pool, 1)
    assert [a.env for a in plan.assignments] == [{}, {}]
    # two cores, four arms: one core each, two at a time
    plan = plan_device_sets([ArmDemand(n, 1) for n in "abcd"], visible_devices({}, None, [0, 1]), None)
    assert plan.parallel == 2 and [a.devices for a in plan.assignments] == [(0,), (1,)] * 2


# --- the scheduler and the simulation -------------------------------------------------------

def test_simulated_makespan_matches_a_schedule_worked_out_by_hand():
    # 8 GPUs. t=0: a (tp4) on 0-3, b (tp4) on 4-7; c and d wait. t=5: b ends, c (tp2) fits
    # on 4,5; d (tp4) does not (6,7 free). t=8: c ends, d starts on 4-7, ends 12. a ends 10.
    plan = plan_device_sets([tp("a", 4), tp("b", 4), tp("c", 2), tp("d", 4)], GPUS8, None)
    result = simulate(plan, {"a": 10.0, "b": 5.0, "c": 3.0, "d": 4.0})
    assert [(t.arm, t.start, t.end, "".join(t.devices)) for t in result.arms] == [
        ("a", 0, 10, "0123"), ("b", 0, 5, "4567"), ("c", 5, 8, "45"), ("d", 8, 12, "4567")]
    assert (result.makespan, result.sequential) == (12.0, 22.0)
    assert result.ratio == pytest.approx(12 / 22)


def test_arms_ending_together_free_their_devices_together():
    # a (0,1) and b (2,3) end at 2 together; x holds 4,5; 6,7 stay free as c (tp4) waits.
    # c then takes 0-3, the first adjacent run, not 0,1 + 6,7 (what a alone would leave)
    plan = plan_device_sets([tp("a", 2), tp("b", 2), tp("x", 2), tp("c", 4)], GPUS8, None)
    result = simulate(plan, {"a": 2.0, "b": 2.0, "x": 9.0, "c": 1.0})
    assert {t.arm: (t.start, "".join(t.devices)) for t in result.arms}["c"] == (2.0, "0123")


def test_the_plan_is_the_schedulers_decisions_for_equal_durations():
    arms = [tp("a", 4), tp("b", 2), tp("c", 4), tp("d", 2), tp("e", 8)]
    plan = plan_device_sets(arms, GPUS8, None)
    simulated = simulate(plan, dict.fromkeys("abcde", 1.0))
    assert [(a.arm, a.devices) for a in plan.assignments] == \
        [(t.arm, t.devices) for t in simulated.arms]


def _check_schedule(plan, durations, result):
    """Independent of the scheduler's code: every arm ran once for its duration on its own
    devices from the pool; arms overlapping in time share no device; never more than
    `parallel` at once; and at every start or end, no waiting arm would have fit."""
    demand = {d.name: d for d in plan.demands}
    timing = {t.arm: t for t in result.arms}
    assert set(timing) == set(durations)
    for t in result.arms:
        assert t.end - t.start == pytest.approx(durations[t.arm])
        assert set(t.devices) <= set(plan.pool) and len(set(t.devices)) == len(t.devices)
        if plan.kind == "gpu":
            assert len(t.devices) == demand[t.arm].devices
    for moment in sorted({x for t in result.arms for x in (t.start, t.end)}):
        running = [t for t in result.arms if t.start <= moment < t.end]
        waiting = [t for t in result.arms if t.start > moment]
        used = [d for t in running for d in t.devices]
        assert len(used) == len(set(used)) <= len(plan.pool)
        assert len(running) <= plan.parallel
        if len(running) < plan.parallel and plan.kind == "gpu":
            assert all(demand[t.arm].devices > len(plan.pool) - len(used) for t in waiting)
        elif len(running) < plan.parallel:
            assert not waiting
    assert result.makespan >= max(durations.values())
    if plan.kind == "gpu":  # device-seconds cannot exceed the pool's capacity
        work = sum(durations[a] * demand[a].devices for a in durations)
        assert result.makespan >= work / len(plan.pool) - 1e-9
    assert result.makespan <= result.sequential + 1e-9  # no moment with nothing running


def test_random_studies_keep_every_invariant():
    rng = random.Random(20260101)
    for case in range(400):
        n_gpus = rng.choice([1, 2, 4, 6, 8])
        if case % 4 == 0:
            pool = visible_devices({}, None, rng.sample(range(32), rng.randint(1, 16)))
            sizes = [rng.choice([1, 1, 2]) for _ in range(rng.randint(1, 6))]
            sizes = [min(s, len(pool.ids)) for s in sizes]
        else:
            pool = visible_devices({}, n_gpus, [])
            sizes = [rng.choice([s for s in (1, 2, 4, 8) if s <= n_gpus])
                     for _ in range(rng.randint(1, 7))]
        arms = [tp(f"arm{i}", s) for i, s in enumerate(sizes)]
        parallel = rng.choice([None, 1, 2, 3])
        durations = {a.name: float(rng.choice([0, 1, 2, 3, 5, 8, 13])) for a in arms}
        plan = plan_device_sets(arms, pool, parallel)
        _check_schedule(plan, durations, simulate(plan, durations))


def test_the_scheduler_as_the_launcher_drives_it():
    plan = plan_device_sets([tp("a", 4), tp("b", 4), tp("c", 4)], GPUS8, None)
    scheduler = Scheduler(plan)
    first = [a.arm for a in iter(scheduler.next_to_start, None)]
    assert first == ["a", "b"] and scheduler.running == ("a", "b")
    scheduler.finish("b")
    third = scheduler.next_to_start()
    assert third.arm == "c" and third.devices == tuple("4567") and third.order == 2
    with pytest.raises(ValueError, match="not running"):
        scheduler.finish("b")
    scheduler.finish("a")
    scheduler.finish("c")
    assert scheduler.done
    record = scheduler.to_record()
    assert json.loads(json.dumps(record)) == record
    assert record["arms"]["c"] == {"devices": list("4567"), "env": {"CUDA_VISIBLE_DEVICES": "4,5,6,7"},
                                   "order": 2}


# --- arms sharing a GPU (arms_per_gpu) --------------------------------------------------------

GPU1, GPUS2 = visible_devices({}, 1, []), visible_devices({}, 2, [])


def share(name: str, memory: float | None = 0.45, **more) -> ArmDemand:
    engine = {**more, **({} if memory is None else {"gpu_memory_utilization": memory})}
    return ArmDemand.from_engine(name, engine)


def test_two_arms_share_one_gpu_in_waves_of_two():
    plan = plan_device_sets([share(n) for n in "abcd"], GPU1, 2, arms_per_gpu=2)
    assert plan.parallel == 2 and plan.arms_per_gpu == 2
    assert [(a.arm, a.env) for a in plan.assignments] == [
        (n, {"CUDA_VISIBLE_DEVICES": "0"}) for n in "abcd"]
    assert starts(simulate(plan, dict.fromkeys("abcd", 1.0))) == {"a": 0, "b": 0, "c": 1, "d": 1}
    assert plan.to_record()["arms_per_gpu"] == 2
    # without sharing the one GPU runs one arm at a time
    alone = plan_device_sets([share(n) for n in "abcd"], GPU1, 2)
    assert starts(simulate(alone, dict.fromkeys("abcd", 1.0))) == {"a": 0, "b": 1, "c": 2, "d": 3}


def test_two_gpus_two_arms_each_run_four_at_once_and_fill_every_gpu_first():
    plan = plan_device_sets([share(n) for n in "abcd"], GPUS2, 4, arms_per_gpu=2)
    assert [(a.arm, a.devices) for a in plan.assignments] == [
        ("a", ("0",)), ("b", ("1",)), ("c", ("0",)), ("d", ("1",))]
    assert set(starts(simulate(plan, dict.fromkeys("abcd", 1.0))).values()) == {0.0}
    # two at once on two GPUs: one arm per GPU, none shares
    plan = plan_device_sets([share(n) for n in "abcd"], GPUS2, 2, arms_per_gpu=2)
    assert [a.devices for a in plan.assignments] == [("0",), ("1",)] * 2


def test_an_arm_that_finishes_frees_its_own_slot_on_a_shared_gpu():
    # one GPU, two slots: b ends first, c takes b's slot while a runs on; d waits for a
    plan = plan_device_sets([share(n) for n in "abcd"], GPU1, None, arms_per_gpu=2)
    result = simulate(plan, {"a": 5.0, "b": 1.0, "c": 1.0, "d": 1.0})
    assert starts(result) == {"a": 0, "b": 0, "c": 1, "d": 2}
    assert result.makespan == 5.0


def test_sharing_is_for_one_gpu_arms_only():
    with pytest.raises(UserError) as caught:
        plan_device_sets([share("a"), share("x", tensor_parallel_size=2)], GPUS2, 2, arms_per_gpu=2)
    assert str(caught.value) == ("arm `x` needs 2 GPUs (tp 2); --arms-per-gpu shares a GPU only "
                                 "among one-GPU arms.")
    plan_device_sets([share("a"), share("x", tensor_parallel_size=2)], GPUS2, 2)  # K=1: fine


def test_sharing_is_for_gpus_not_cpu_cores():
    cpu = visible_devices({}, None, range(4))
    with pytest.raises(UserError, match=r"^--arms-per-gpu is for GPUs; this machine has 4 CPU "
                                        r"cores \(0-3\)"):
        plan_device_sets([ArmDemand(n, 1) for n in "ab"], cpu, 2, arms_per_gpu=2)
    assert plan_device_sets([ArmDemand(n, 1) for n in "ab"], cpu, 2, arms_per_gpu=1).parallel == 2


@pytest.mark.parametrize("arms_per_gpu", [0, -1, 1.5, True, "2"])
def test_arms_per_gpu_must_be_one_or_more(arms_per_gpu):
    with pytest.raises(UserError, match="arms_per_gpu must be a whole number of 1 or more"):
        plan_device_sets([share("a")], GPU1, None, arms_per_gpu=arms_per_gpu)


@pytest.mark.parametrize("memories, arms_per_gpu, named, message", [
    ((0.6, 0.6), 2, "a", "has gpu_memory_utilization 0.6; with --arms-per-gpu 2, 2 arms on one "
     "GPU would ask for 120% of its memory (a 0.6, b 0.6)"),
    ((0.45, 0.6, 0.3), 2, "b", "(b 0.6, a 0.45)"),
    ((None, None), 2, "a", "has gpu_memory_utilization 0.9 (vLLM's default; the engine does not "
     "set it)"),
    ((0.45, 0.45, 0.45), 3, "a", "at most 1/3, e.g. 0.3."),
])
def test_arms_sharing_a_gpu_must_fit_in_its_memory(memories, arms_per_gpu, named, message):
    arms = [share(n, m) for n, m in zip("abc", memories)]
    with pytest.raises(UserError) as caught:
        plan_device_sets(arms, GPU1, None, arms_per_gpu=arms_per_gpu)
    text = str(caught.value)
    assert text.startswith(f"arm `{named}` has gpu_memory_utilization") and message in text
    assert (f"set arms.{named}.engine.gpu_memory_utilization (or arm_defaults.engine's, for "
            f"every arm) to at most 1/{arms_per_gpu}, e.g. ") in text


@pytest.mark.parametrize("memories, arms_per_gpu, parallel", [
    ((0.45, 0.45), 2, None),
    ((0.5, 0.5, 0.9), 2, 1),  # one at a time: no two arms on the GPU together
    ((0.3, 0.3, 0.4), 3, None),  # exactly the whole GPU
    ((0.7, 0.3, 0.2), 2, None),  # the two largest fit
    ((0.9, 0.9), 1, None),  # no sharing: vLLM's default is fine
])
def test_memory_shares_that_fit_pass(memories, arms_per_gpu, parallel):
    arms = [share(n, m) for n, m in zip("abc", memories)]
    plan = plan_device_sets(arms, GPU1, parallel, arms_per_gpu=arms_per_gpu)
    assert len(plan.assignments) == len(arms)


@pytest.mark.parametrize("memory", ["0.45", 0, 1.5, True, float("nan")])
def test_a_memory_share_that_is_not_a_fraction_is_named_when_arms_share(memory):
    with pytest.raises(UserError, match=r"arm `b`: gpu_memory_utilization must be a number "
                                        r"above 0 and at most 1"):
        plan_device_sets([share("a"), share("b", memory)], GPU1, None, arms_per_gpu=2)


def test_one_arm_per_gpu_is_the_plan_before_sharing_existed():
    # records written by the planner before arms_per_gpu (git 603d5a0), plus the new key
    arms = [tp("a", 4), tp("b", 2), tp("c", 4), tp("d", 2), tp("e", 1)]
    record = plan_device_sets(arms, GPUS8, None).to_record()

    def gpus(*ids):
        return {"devices": list(ids), "env": {"CUDA_VISIBLE_DEVICES": ",".join(ids)}}

    assert record == {"kind": "gpu", "pool": list("01234567"), "parallel": 5, "arms_per_gpu": 1,
                      "arms": {"a": {**gpus(*"0123"), "order": 0}, "b": {**gpus("4", "5"), "order": 1},
                               "d": {**gpus("6", "7"), "order": 2},
                               "c": {**gpus(*"0123"), "order": 3}, "e": {**gpus("4"), "order": 4}}}
    assert list(record) == ["kind", "pool", "parallel", "arms_per_gpu", "arms"]
    assert plan_device_sets(arms, GPUS8, None, arms_per_gpu=1) == plan_device_sets(arms, GPUS8, None)
    one = plan_device_sets([share(n) for n in "abcd"], GPU1, 2, arms_per_gpu=1)
    assert one.units == (("0",),) and one.to_record() == {
        "kind": "gpu", "pool": ["0"], "parallel": 2, "arms_per_gpu": 1,
        "arms": {n: {**gpus("0"), "order": k} for k, n in enumerate("abcd")}}


def _check_shared_schedule(plan, durations, result):
    """Independent of the scheduler's code, for plans whose one-GPU arms share GPUs: never
    more than `arms_per_gpu` arms on one GPU or `parallel` in all at once, no waiting arm
    idle while a slot is free, and the slots' capacity bounds the makespan."""
    k = plan.arms_per_gpu
    timing = {t.arm: t for t in result.arms}
    assert set(timing) == set(durations)
    for t in result.arms:
        assert t.end - t.start == pytest.approx(durations[t.arm])
        assert len(t.devices) == 1 and t.devices[0] in plan.pool
    for moment in sorted({x for t in result.arms for x in (t.start, t.end)}):
        running = [t for t in result.arms if t.start <= moment < t.end]
        waiting = [t for t in result.arms if t.start > moment]
        per_gpu = Counter(t.devices[0] for t in running)
        assert max(per_gpu.values(), default=0) <= k
        assert len(running) <= plan.parallel
        if len(running) < plan.parallel and len(running) < k * len(plan.pool):
            assert not waiting
    assert result.makespan >= max(durations.values())
    assert result.makespan >= sum(durations.values()) / (k * len(plan.pool)) - 1e-9
    assert result.makespan <= result.sequential + 1e-9


def test_random_shared_gpu_studies_keep_every_invariant():
    rng = random.Random(20260202)
    shared = 0
    for _ in range(300):
        pool = visible_devices({}, rng.choice([1, 2, 3, 4]), [])
        k = rng.choice([2, 3, 4])
        arms = [share(f"arm{i}", rng.choice([0.1, 0.2, 1 / k])) for i in range(rng.randint(1, 9))]
        parallel = rng.choice([None, 1, 2, 3, 5])
        durations = {a.name: float(rng.choice([0, 1, 2, 3, 5, 8, 13])) for a in arms}
        plan = plan_device_sets(arms, pool, parallel, arms_per_gpu=k)
        assert plan.units == tuple((i,) for _ in range(k) for i in pool.ids)
        result = simulate(plan, durations)
        _check_shared_schedule(plan, durations, result)
        shared += any(n > 1 for moment in {t.start for t in result.arms}
                      for n in Counter(t.devices[0] for t in result.arms
                                       if t.start <= moment < t.end).values())
    assert shared > 50  # the cases do exercise GPUs holding more than one arm


def test_simulate_refuses_durations_that_do_not_match_the_arms():
    plan = plan_device_sets([tp("a", 1), tp("b", 1)], GPUS8, None)
    with pytest.raises(ValueError, match=r"missing \['b'\], unknown \['z'\]"):
        simulate(plan, {"a": 1.0, "z": 2.0})
    with pytest.raises(ValueError, match="arm 'b'"):
        simulate(plan, {"a": 1.0, "b": float("nan")})
    with pytest.raises(ValueError, match="arm .b."):
        simulate(plan, {"a": 1.0, "b": True})


def test_the_planner_is_pure_standard_library():
    root = Path(__file__).resolve().parents[2] / "evals" / "plan"
    allowed = {"evals", "evals.errors", "evals.plan.devices"}
    for name in ("devices.py", "device_simulation.py"):
        tree = ast.parse((root / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module] if isinstance(node, ast.ImportFrom) else [])
            for module in modules:
                assert (module.split(".")[0] in sys.stdlib_module_names or module in allowed
                        or module == "__future__"), (name, module)
