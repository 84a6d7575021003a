"""Running a study's arms side by side on disjoint devices (parent side).

The device planner (evals.plan.devices) says which GPUs or CPU cores each arm gets and
which waiting arm starts next; each started arm runs through the runner
(evals.runner.launch.run_arm) in a thread of this process, with its devices in its
worker's environment. `parallel=1` is the one-arm-at-a-time run of two-arm configs;
`arms_per_gpu` K > 1 lets K one-GPU arms share each GPU (--arms-per-gpu).
A failed arm frees its devices and is reported; the others go on.
"""

from __future__ import annotations

import os
import subprocess
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from evals.errors import RunFailed, UserError
from evals.hardware import probe
from evals.plan.devices import ArmDemand, DevicePlan, Scheduler, plan_device_sets, visible_devices
from evals.runner.asks import MODEL_READY
from evals.runner.launch import run_arm, stop_process_group

PLANNER_VARIABLES = ("CUDA_VISIBLE_DEVICES", "VLLM_CPU_OMP_THREADS_BIND", "OMP_NUM_THREADS")


def gpu_count() -> int:
    """GPUs of this machine, as the preflight and the manifests see them
    (evals.hardware.probe: `nvidia-smi`, no torch import in the parent); 0 with
    EVALS_FORCE_CPU=1."""
    if os.environ.get("EVALS_FORCE_CPU") == "1":
        return 0
    return len(probe().gpus)


def default_parallel(kind: str) -> int | None:
    """GPU machines run as many arms as fit; CPU machines one at a time (arms on a few cores
    each would each run slower, and their memory adds up) unless `--parallel` says more."""
    return None if kind == "gpu" else 1


def device_plan(specs: dict, parallel: int | None, source: str,
                arms_per_gpu: int = 1) -> DevicePlan:
    pool = visible_devices(os.environ, gpu_count(), sorted(os.sched_getaffinity(0)))
    parallel = parallel if parallel is not None else default_parallel(pool.kind)
    demands = []
    for name, spec in specs.items():
        try:
            demands.append(ArmDemand.from_engine(name, spec.engine))
        except ValueError as exc:
            raise UserError(f"{source}: arms.{name}.engine: {exc}") from None
        own = sorted(set(spec.env) & set(PLANNER_VARIABLES))
        if own and (parallel != 1 or arms_per_gpu != 1):
            raise UserError(f"{source}: arms.{name}.env sets {own[0]}, which the device planner "
                            "assigns when arms run side by side; remove it, or run with "
                            "`--parallel 1` (and without --arms-per-gpu).")
    if parallel == 1 and any(set(s.env) & set(PLANNER_VARIABLES) for s in specs.values()):
        pool = visible_devices({}, 0, sorted(os.sched_getaffinity(0)))  # the arm's own say
    return plan_device_sets(demands, pool, parallel, arms_per_gpu)


class GpuMemoryTurns:
    """At most one arm per GPU changes that GPU's memory at a time: an engine start or an
    engine shutdown. vLLM sizes its KV cache from the free memory it measures while it
    starts: another engine starting on the GPU then counts against it (vLLM #55827), and one
    shutting down frees memory under it, which vLLM stops on ("Error in memory profiling.
    Initial free memory 97.02 GiB, current free memory 138.94 GiB": seen on the H200 when an
    arm ended while the next one profiled, benchmarks/results/gpu-h200/session4)."""

    def __init__(self, echo):
        self._echo = echo
        self._changed = threading.Condition()
        self._held: dict[str, tuple[str, str]] = {}  # device -> (arm, "start" | "shutdown")

    def take(self, arm: str, devices, what: str) -> None:
        """Blocks until no other arm starts or shuts down an engine on `devices`."""
        told = False
        with self._changed:
            while busy := sorted({self._held[d] for d in devices
                                  if d in self._held and self._held[d][0] != arm}):
                if not told:
                    other, doing = busy[0]
                    self._echo(f"[evals] {arm}: its engine {what} waits for {other}'s engine "
                               f"{doing} (arms sharing a GPU change its memory one at a time)")
                    told = True
                self._changed.wait()
            for device in devices:
                self._held[device] = (arm, what)

    def give(self, arm: str) -> None:
        with self._changed:
            for device in [d for d, (holder, _) in self._held.items() if holder == arm]:
                del self._held[device]
            self._changed.notify_all()


def run_side_by_side(plan: DevicePlan, specs: dict, echo, first_answer=None,
                     after_first=None) -> tuple[dict, dict, dict]:
    """Every arm of `plan`, as many at once as it allows. Returns each finished arm's
    layout, each failed arm's message, and the device record (which devices each arm had).

    `first_answer`: the answerer of the arms started before `after_first()` has run (the
    config audit's go); `after_first()` is called when the first arm ends and may raise
    (the audit's stop): no further arm starts, the running ones are stopped."""
    scheduler = Scheduler(plan)
    layouts, failed = {}, {}
    procs: dict[str, subprocess.Popen] = {}
    lock = threading.Lock()
    gate_passed = after_first is None

    ready: dict[str, threading.Event] = {}  # an arm's engine has started (or it ended)
    placed: dict[str, tuple] = {}  # running arm -> its devices
    memory = GpuMemoryTurns(echo) if plan.arms_per_gpu > 1 else None

    def start(assignment) -> Future:
        arm = assignment.arm

        def register(proc):
            with lock:
                procs[arm] = proc
        if assignment.env:
            echo(f"[evals] {arm}: devices {','.join(map(str, assignment.devices))}")
        # arms sharing a GPU start their engines one at a time: vLLM sizes its KV cache
        # from the GPU memory in use while it profiles, so another engine starting on the
        # same GPU then would count against it (vLLM #55827)
        before = [other for other, devices in placed.items()
                  if set(devices) & set(assignment.devices)] if plan.arms_per_gpu > 1 else []
        ready[arm] = threading.Event()
        placed[arm] = assignment.devices
        answer = None if gate_passed else first_answer

        def arm_echo(line: str) -> None:
            if MODEL_READY in line:
                ready[arm].set()
                if memory is not None:
                    memory.give(arm)
            echo(line)

        def engine_turn() -> None:
            for other in before:
                if not ready[other].is_set():
                    echo(f"[evals] {arm}: waits for {other}'s engine to start (arms "
                         "sharing a GPU start their engines one at a time)")
                    ready[other].wait()
            memory.take(arm, assignment.devices, "start")

        def engine_release() -> None:
            memory.take(arm, assignment.devices, "shutdown")

        def run() -> object:
            try:  # the worker starts at once and imports while the engine before it starts
                shared = memory is not None
                return run_arm(specs[arm], echo=arm_echo, answer=answer,
                               devices_env=assignment.env, on_start=register,
                               engine_turn=engine_turn if shared else None,
                               engine_release=engine_release if shared else None)
            finally:
                ready[arm].set()
                if memory is not None:
                    memory.give(arm)
        return pool.submit(run)

    with ThreadPoolExecutor(max_workers=plan.parallel) as pool:
        running: dict[Future, str] = {}
        try:
            while not scheduler.done:
                for assignment in iter(scheduler.next_to_start, None):
                    running[start(assignment)] = assignment.arm
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    arm = running.pop(future)
                    scheduler.finish(arm)
                    placed.pop(arm, None)
                    try:
                        layouts[arm] = future.result()
                    except RunFailed as exc:
                        failed[arm] = str(exc)
                        echo(f"[evals] arm {arm} failed; its comparisons fail, the other arms "
                             "go on")
                    if not gate_passed:
                        after_first()
                        gate_passed = True
        except BaseException:
            with lock:
                for proc in procs.values():
                    stop_process_group(proc)
            raise
    return layouts, failed, scheduler.to_record()
