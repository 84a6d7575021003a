"""Which devices each arm of a study gets, and in which order the arms start.

Arms whose devices do not overlap run at the same time. On a GPU machine an arm gets as
many of the visible GPUs as its engine has ranks (its own CUDA_VISIBLE_DEVICES), or, with
`arms_per_gpu` K > 1, one-GPU arms share a GPU, K at most on each, each with its
`gpu_memory_utilization` share of the GPU's memory; on a CPU machine the cores are split
into equal contiguous blocks, one per arm running at once (vLLM's
VLLM_CPU_OMP_THREADS_BIND, one core list per rank separated by '|'). One `Scheduler`
decides which waiting arm starts next: the launcher drives it with real arms and
`simulate` (evals.plan.device_simulation) with durations, so a simulated schedule is the
one the launcher follows. Pure: the caller reads the environment, GPU count and CPU
affinity and passes them in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from evals.errors import UserError

# vLLM's world size is tp x pp x prefill-context-parallel; data parallel multiplies it by
# one engine per DP rank (vllm/config/parallel.py, ParallelConfig.world_size).
PARALLEL_KEYS = {"tensor_parallel_size": "tp", "pipeline_parallel_size": "pp",
                 "prefill_context_parallel_size": "pcp", "data_parallel_size": "dp"}
# vLLM's default share of each GPU's memory an engine takes (vllm/config/cache.py,
# CacheConfig.gpu_memory_utilization)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


def _sizes(engine: Mapping) -> dict[str, int]:
    sizes = {}
    for key in PARALLEL_KEYS:
        value = engine.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a whole number of 1 or more, got {value!r}.")
        sizes[key] = value
    return sizes


def devices_needed(engine: Mapping) -> int:
    """Devices (GPUs, or CPU ranks) an arm's engine uses: tp x pp x pcp x dp; a missing key
    counts as 1. ValueError naming the key for anything but a positive whole number."""
    total = 1
    for value in _sizes(engine).values():
        total *= value
    return total


@dataclass(frozen=True, slots=True)
class ArmDemand:
    """One arm and the number of devices its engine needs."""

    name: str
    devices: int
    shape: str = ""
    """How `devices` came about, for messages: "tp 4 x pp 2"."""
    gpu_memory_utilization: object = None
    """The engine's `gpu_memory_utilization` as configured (None: unset, vLLM's default);
    checked only when arms share a GPU."""

    @classmethod
    def from_engine(cls, name: str, engine: Mapping) -> ArmDemand:
        sizes = _sizes(engine)
        shape = " x ".join(f"{PARALLEL_KEYS[k]} {v}" for k, v in sizes.items()
                           if v > 1 or k == "tensor_parallel_size")
        return cls(name, devices_needed(engine), shape, engine.get("gpu_memory_utilization"))


@dataclass(frozen=True, slots=True)
class DevicePool:
    """The devices this process may hand out: GPU ids as CUDA_VISIBLE_DEVICES spells them
    (indices or UUIDs), or CPU core ids."""

    kind: str  # "gpu" | "cpu"
    ids: tuple

    def describe(self) -> str:
        what = "GPU" if self.kind == "gpu" else "CPU core"
        return f"{len(self.ids)} {what}{'s' if len(self.ids) != 1 else ''} ({_id_list(self.ids)})"


def visible_devices(env: Mapping[str, str], gpu_count: int | None, cpu_ids: Sequence[int],
                    physical_core: Mapping[int, object] | None = None) -> DevicePool:
    """GPUs when `gpu_count` (what CUDA can use, e.g. torch.cuda.device_count()) is 1 or more:
    the ids in CUDA_VISIBLE_DEVICES if set, else 0..gpu_count-1. Otherwise the CPU cores in
    `cpu_ids` (os.sched_getaffinity(0)); with `physical_core` (logical CPU -> its physical
    core, e.g. (package id, core id) from /sys/devices/system/cpu/cpuN/topology) one logical
    CPU per physical core, the lowest, as vLLM's own binding does on x86: hyperthread
    siblings are numbered apart, so blocks of ids would otherwise share physical cores."""
    if gpu_count:
        listed = env.get("CUDA_VISIBLE_DEVICES")
        if listed is None:
            return DevicePool("gpu", tuple(str(i) for i in range(gpu_count)))
        ids = tuple(part.strip() for part in listed.split(","))
        if "" in ids:
            raise UserError(f"CUDA_VISIBLE_DEVICES={listed!r} has an empty entry; list device "
                            "ids separated by commas, e.g. 0,1,2,3.")
        if len(set(ids)) != len(ids):
            raise UserError(f"CUDA_VISIBLE_DEVICES={listed!r} names a device twice.")
        if len(ids) > gpu_count:
            raise UserError(f"CUDA_VISIBLE_DEVICES={listed!r} names {len(ids)} devices but CUDA "
                            f"can use {gpu_count}; check the ids (CUDA stops at the first "
                            "one that does not exist).")
        return DevicePool("gpu", ids)
    cores = tuple(sorted(set(cpu_ids)))
    if physical_core is not None:
        first: dict[object, int] = {}
        for core in cores:
            first.setdefault(physical_core.get(core, ("cpu", core)), core)
        cores = tuple(sorted(first.values()))
    if not cores:
        raise UserError("no CPU core is available to this process (empty CPU affinity).")
    return DevicePool("cpu", cores)


@dataclass(frozen=True, slots=True)
class Assignment:
    """One arm's start: its devices and the environment its worker gets."""

    arm: str
    devices: tuple
    env: dict[str, str]
    order: int
    """0 for the first arm started, 1 for the next, ..."""

    def to_record(self) -> dict:
        return {"devices": list(self.devices), "env": dict(self.env), "order": self.order}


@dataclass(frozen=True, slots=True)
class DevicePlan:
    """What the scheduler hands out, and the assignments it makes when every arm takes
    equally long. With real durations the launcher's starts can differ in order and ids
    (an arm takes the devices of whichever arm finished first); record those."""

    kind: str
    pool: tuple
    parallel: int
    """Most arms running at once."""
    demands: tuple[ArmDemand, ...]
    """In the config's order: the order in which waiting arms are considered."""
    units: tuple[tuple, ...]
    """What an arm takes: one GPU id each (with arms_per_gpu K, each id K times: one slot
    each); on CPU one block of cores each (an arm takes one)."""
    assignments: tuple[Assignment, ...] = field(default=())
    arms_per_gpu: int = 1
    """Most arms on one GPU at once (1: each arm has its GPUs to itself)."""

    def units_for(self, demand: ArmDemand) -> int:
        return demand.devices if self.kind == "gpu" else 1

    def env_for(self, demand: ArmDemand, devices: tuple) -> dict[str, str]:
        if self.kind == "gpu":
            return {"CUDA_VISIBLE_DEVICES": ",".join(devices)}
        if len(self.units) == 1:  # one arm at a time: vLLM's own binding, as before studies
            return {}
        per_rank = len(devices) // demand.devices
        ranks = [devices[r * per_rank:(r + 1) * per_rank] for r in range(demand.devices)]
        return {"VLLM_CPU_OMP_THREADS_BIND": "|".join(_id_list(r) for r in ranks),
                "OMP_NUM_THREADS": str(per_rank)}

    def to_record(self) -> dict:
        return plan_record(self, self.assignments)


def plan_record(plan: DevicePlan, assignments: Sequence[Assignment]) -> dict:
    """Which devices each arm had, for the run's record (which carries the schema version)."""
    return {"kind": plan.kind, "pool": list(plan.pool), "parallel": plan.parallel,
            "arms_per_gpu": plan.arms_per_gpu,
            "arms": {a.arm: a.to_record() for a in sorted(assignments, key=lambda a: a.order)}}


def plan_device_sets(demands: Sequence[ArmDemand], pool: DevicePool,
                     parallel: int | None = None, arms_per_gpu: int = 1) -> DevicePlan:
    """The plan for running `demands` on `pool`, at most `parallel` arms at once (None: as
    many as fit; 1: one after another in the given order). On CPU the cores are split into
    min(arms, parallel, cores // largest rank count) equal contiguous blocks; cores left
    over by the division stay idle, so that arms running side by side compare fairly.
    `arms_per_gpu` K > 1 (GPU pools, one-GPU arms only): each GPU holds up to K arms at
    once, in K slots; arms fill the first slot of every GPU before a second one.
    UserError when an arm needs more devices than the pool has, or when arms sharing a GPU
    would ask for more than its memory."""
    for flag, value in (("parallel", parallel), ("arms_per_gpu", arms_per_gpu)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise UserError(f"{flag} must be a whole number of 1 or more, got {value!r}.")
    if not demands:
        raise ValueError("no arms to plan.")
    names = [d.name for d in demands]
    if len(set(names)) != len(names):
        raise ValueError(f"arm names repeat: {names}.")
    for demand in demands:
        if demand.devices > len(pool.ids):
            why = [demand.shape] if demand.shape else []
            unit = "GPUs" if pool.kind == "gpu" else "CPU cores"
            if pool.kind == "cpu":
                why.append("at least one core per rank")
            shape = f" ({', '.join(why)})" if why else ""
            raise UserError(f"arm `{demand.name}` needs {demand.devices} {unit}{shape} but this "
                            f"machine has {pool.describe()}; lower its parallel sizes or run "
                            "it on a larger machine.")
    lanes = min(len(demands), parallel or len(demands))
    if arms_per_gpu > 1:
        _check_sharing(demands, pool, arms_per_gpu, min(arms_per_gpu, lanes))
    if pool.kind == "gpu":  # slot-major: (0, 1, 0, 1) for 2 GPUs x 2 slots
        units = tuple((i,) for _ in range(arms_per_gpu) for i in pool.ids)
    else:
        lanes = min(lanes, len(pool.ids) // max(d.devices for d in demands))
        size = len(pool.ids) // lanes
        units = tuple(pool.ids[k * size:(k + 1) * size] for k in range(lanes))
    plan = DevicePlan(pool.kind, pool.ids, lanes, tuple(demands), units,
                      arms_per_gpu=arms_per_gpu)
    scheduler = Scheduler(plan)
    while not scheduler.done:  # every arm equally long: waves
        started = list(iter(scheduler.next_to_start, None))
        for assignment in started:
            scheduler.finish(assignment.arm)
    return replace(plan, assignments=tuple(scheduler.started))


def shared_memory_utilization(arms_per_gpu: int) -> float:
    """A `gpu_memory_utilization` with which `arms_per_gpu` arms fit on one GPU: vLLM's
    default divided among them, rounded down to hundredths (2: 0.45, 3: 0.3)."""
    return math.floor(round(DEFAULT_GPU_MEMORY_UTILIZATION * 100) / arms_per_gpu) / 100


def _check_sharing(demands: Sequence[ArmDemand], pool: DevicePool, arms_per_gpu: int,
                   together: int) -> None:
    """Arms may share a GPU only on a GPU pool, each on one GPU, and the `together` arms with
    the largest memory shares (the most that can be on one GPU at once) must fit in it."""
    flag = f"--arms-per-gpu {arms_per_gpu}"
    if pool.kind != "gpu":
        raise UserError(f"--arms-per-gpu is for GPUs; this machine has {pool.describe()}. "
                        "Use --parallel to run CPU arms side by side on their own cores.")
    for demand in demands:
        if demand.devices != 1:
            shape = f" ({demand.shape})" if demand.shape else ""
            raise UserError(f"arm `{demand.name}` needs {demand.devices} GPUs{shape}; "
                            "--arms-per-gpu shares a GPU only among one-GPU arms.")
    shares = {d.name: _memory_share(d) for d in demands}
    largest = sorted(shares, key=lambda name: -shares[name])[:together]  # stable: config order
    total = sum(shares[name] for name in largest)
    if total > 1.0 + 1e-9:
        name = largest[0]
        unset = (" (vLLM's default; the engine does not set it)"
                 if next(d for d in demands if d.name == name).gpu_memory_utilization is None
                 else "")
        raise UserError(
            f"arm `{name}` has gpu_memory_utilization {shares[name]:g}{unset}; with {flag}, "
            f"{together} arms on one GPU would ask for {total:.0%} of its memory "
            f"({', '.join(f'{n} {shares[n]:g}' for n in largest)}); set "
            f"arms.{name}.engine.gpu_memory_utilization (or arm_defaults.engine's, for every "
            f"arm) to at most 1/{arms_per_gpu}, e.g. {shared_memory_utilization(arms_per_gpu):g}.")


def _memory_share(demand: ArmDemand) -> float:
    value = demand.gpu_memory_utilization
    if value is None:
        return DEFAULT_GPU_MEMORY_UTILIZATION
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise UserError(f"arm `{demand.name}`: gpu_memory_utilization must be a number above 0 "
                        f"and at most 1, got {value!r}.")
    return float(value)


class Scheduler:
    """List scheduling (Graham 1966): whenever devices free up, the first waiting arm in the
    config's order that fits starts, while fewer than `plan.parallel` arms run. An arm takes
    the first run of adjacent free units in pool order, else the lowest free ones.

    The launcher calls next_to_start() until it returns None, starts those arms, and calls
    finish(arm) when one ends; simulate() drives the same object with durations."""

    def __init__(self, plan: DevicePlan):
        self._plan = plan
        self._waiting = list(plan.demands)
        self._free = list(range(len(plan.units)))
        self._running: dict[str, list[int]] = {}
        self._started: list[Assignment] = []

    @property
    def done(self) -> bool:
        return not self._waiting and not self._running

    @property
    def running(self) -> tuple[str, ...]:
        return tuple(self._running)

    @property
    def started(self) -> tuple[Assignment, ...]:
        return tuple(self._started)

    def next_to_start(self) -> Assignment | None:
        """The next arm to start now (its devices are then taken), or None."""
        if len(self._running) >= self._plan.parallel:
            return None
        for demand in self._waiting:
            picked = _pick(self._free, self._plan.units_for(demand))
            if picked is None:
                continue
            self._waiting.remove(demand)
            self._free = [u for u in self._free if u not in picked]
            self._running[demand.name] = picked
            devices = tuple(d for u in picked for d in self._plan.units[u])
            assignment = Assignment(demand.name, devices, self._plan.env_for(demand, devices),
                                    len(self._started))
            self._started.append(assignment)
            return assignment
        return None

    def finish(self, arm: str) -> None:
        """`arm` ended (done or failed): its devices are free again."""
        if arm not in self._running:
            raise ValueError(f"arm {arm!r} is not running.")
        self._free = sorted(self._free + self._running.pop(arm))

    def to_record(self) -> dict:
        return plan_record(self._plan, self._started)


def _pick(free: list[int], need: int) -> list[int] | None:
    if need > len(free):
        return None
    for i in range(len(free) - need + 1):
        if free[i + need - 1] - free[i] == need - 1:  # free is sorted and unique: adjacent
            return free[i:i + need]
    return free[:need]


def _id_list(ids: Sequence) -> str:
    """CPU cores as vLLM's parser reads them ("0-3,8"); GPU ids joined by commas."""
    if not all(isinstance(i, int) for i in ids):
        return ",".join(str(i) for i in ids)
    parts, start = [], None
    for k, core in enumerate(ids):
        if start is None:
            start = core
        if k + 1 == len(ids) or ids[k + 1] != core + 1:
            parts.append(str(core) if core == start else f"{start}-{core}")
            start = None
    return ",".join(parts)
