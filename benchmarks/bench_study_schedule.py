"""Wall time of a study whose arms run side by side on one 8-GPU machine, simulated with the
launcher's own scheduler (evals.plan.devices.Scheduler via evals.plan.device_simulation),
against the same arms one after another (parallel=1) simulated in the same run.

    python benchmarks/bench_study_schedule.py [--times MEASURED.json] [--start-slowdown 1.5]
        [--gpus 8] [--tp 2] [--arms-per-gpu 1]

--gpus, --tp and --arms-per-gpu change the machine and the arms: `--gpus 1 --tp 1
--arms-per-gpu 2` is two one-GPU arms at once on one GPU (`python -m evals ab STUDY
--arms-per-gpu 2`), each with gpu_memory_utilization 0.45, to compare with a measurement.

The study: Qwen3.6-35B-A3B, tensor_parallel_size 2 per arm (configs/mtp_prefix.yaml's
engine), tasks tiny_reviews_shared_prefix (1,200 items) and gsm8k (1,319 test items).
Four arms (baseline, +prefix caching, +MTP, +both) all at once and at most two at a time;
six arms (two more: +FP8 KV cache, +FP8 KV cache +both) with queueing, and two at a time.

No GPU here: the times below are ASSUMPTIONS, to be replaced with measured ones. --times
reads a JSON file of the same shape, {"arm": {"engine_start": s, "tasks": {"task": s}}},
whose arms replace the assumed ones (the output says which arms are measured).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evals.plan.device_simulation import simulate  # noqa: E402
from evals.errors import UserError  # noqa: E402
from evals.plan.devices import (ArmDemand, plan_device_sets, shared_memory_utilization,  # noqa: E402
                                visible_devices)

# ASSUMPTIONS (seconds), to replace with measured times (--times). Where they come from:
# - engine start (process start to first item: import, weights, torch.compile, CUDA graph
#   capture): vllm-project/vllm#52682 measured Qwen3.6-27B-FP8 at TP=4 on A800 GPUs ready
#   to serve after 191 s with a warm compile cache and 345 s cold; 240 s is taken for a
#   35B MoE at TP=2 (~35 GB of bf16 weights per GPU), 30 s more with MTP (the draft head is
#   compiled and its CUDA graphs captured too). Weights from slow network storage can take
#   far longer (vllm-project/vllm#17327: 558 s to load weights).
# - tasks: items x assumed seconds per item at offline batch throughput. Baseline 0.030 s
#   per shared-prefix item (short answers, ~350-token shared prompt) and 0.095 s per gsm8k
#   item (5-shot, up to 256 generated tokens); prefix caching saves prefill (x0.6 on the
#   shared-prefix task, x0.9 on gsm8k's shared 5-shot block); MTP speeds decoding (x0.7 on
#   gsm8k's long answers, x0.95 on one-word answers); FP8 KV cache x0.96 on gsm8k.
ASSUMED_SECONDS = {
    "baseline": {"engine_start": 240, "tasks": {"tiny_reviews_shared_prefix": 36, "gsm8k": 125}},
    "prefix_caching": {"engine_start": 240,
                       "tasks": {"tiny_reviews_shared_prefix": 22, "gsm8k": 113}},
    "mtp": {"engine_start": 270, "tasks": {"tiny_reviews_shared_prefix": 34, "gsm8k": 87}},
    "prefix_caching+mtp": {"engine_start": 270,
                           "tasks": {"tiny_reviews_shared_prefix": 20, "gsm8k": 79}},
    "kv_fp8": {"engine_start": 240, "tasks": {"tiny_reviews_shared_prefix": 36, "gsm8k": 120}},
    "kv_fp8+prefix_caching+mtp": {"engine_start": 270,
                                  "tasks": {"tiny_reviews_shared_prefix": 20, "gsm8k": 76}},
}
GPUS = 8
TENSOR_PARALLEL = 2
FOUR, SIX = list(ASSUMED_SECONDS)[:4], list(ASSUMED_SECONDS)
STUDIES = [  # name, arms, parallel
    ("4 arms, all at once", FOUR, None),
    ("4 arms, at most 2 at once", FOUR, 2),
    ("6 arms, as many as fit (queueing)", SIX, None),
    ("6 arms, at most 2 at once", SIX, 2),
]


def read_times(path: str | None) -> tuple[dict, list[str]]:
    """The assumed times with a measured file's arms replacing them; the measured arms."""
    if path is None:
        return ASSUMED_SECONDS, []
    measured = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(measured, dict) or not all(isinstance(t, dict) for t in measured.values()):
        sys.exit(f"{path}: expected {{\"arm\": {{\"engine_start\": s, \"tasks\": {{...}}}}}}.")
    unknown = sorted(set(measured) - set(ASSUMED_SECONDS))
    if unknown:
        sys.exit(f"{path}: unknown arms {unknown}; the study's arms are {list(ASSUMED_SECONDS)}.")
    for arm, times in measured.items():
        tasks = times.get("tasks")
        numbers = [times.get("engine_start"), *(tasks.values() if isinstance(tasks, dict) else ())]
        if not tasks or not isinstance(tasks, dict) or not all(
                type(x) in (int, float) and math.isfinite(x) and x >= 0 for x in numbers):
            sys.exit(f"{path}: arm {arm!r} needs engine_start and tasks as seconds >= 0.")
    return {**ASSUMED_SECONDS, **measured}, sorted(measured)


def arm_seconds(times: dict, start_slowdown: float = 1.0) -> dict[str, float]:
    return {arm: t["engine_start"] * start_slowdown + sum(t["tasks"].values())
            for arm, t in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", help="JSON file of measured times (shape: see the docstring)")
    parser.add_argument("--start-slowdown", type=float, default=1.5,
                        help="factor on engine starts in the pessimistic column (default 1.5)")
    parser.add_argument("--gpus", type=int, default=GPUS,
                        help=f"GPUs of the machine (default {GPUS})")
    parser.add_argument("--tp", type=int, default=TENSOR_PARALLEL,
                        help=f"tensor_parallel_size of every arm (default {TENSOR_PARALLEL})")
    parser.add_argument("--arms-per-gpu", type=int, default=1, metavar="K",
                        help="one-GPU arms sharing each GPU (default 1; needs --tp 1)")
    args = parser.parse_args()
    if min(args.gpus, args.tp, args.arms_per_gpu) < 1:
        sys.exit("--gpus, --tp and --arms-per-gpu must be 1 or more.")
    times, measured = read_times(args.times)
    seconds = arm_seconds(times)
    slowed = arm_seconds(times, args.start_slowdown)
    pool = visible_devices({}, args.gpus, [])
    engine = {"tensor_parallel_size": args.tp}
    if args.arms_per_gpu > 1:  # the arms' memory shares must fit on one GPU together
        engine["gpu_memory_utilization"] = shared_memory_utilization(args.arms_per_gpu)
    print(f"times: measured for {measured or 'no arm'}, assumed for "
          f"{[a for a in times if a not in measured] or 'no arm'}")
    print(f"{'arm':<28}{'engine start':>14}{'tasks':>10}{'total':>10}")
    for arm, t in times.items():
        print(f"{arm:<28}{t['engine_start']:>13.0f}s{sum(t['tasks'].values()):>9.0f}s"
              f"{seconds[arm]:>9.0f}s")
    print()
    sharing = (f", {args.arms_per_gpu} arms per GPU (gpu_memory_utilization "
               f"{engine['gpu_memory_utilization']:g} each)" if args.arms_per_gpu > 1 else "")
    gpus = f"{args.gpus} GPU{'s' if args.gpus != 1 else ''}"
    print(f"{gpus}, tensor_parallel_size {args.tp} per arm{sharing}; reference: the same arms "
          "one after another (parallel=1)")
    print(f"{'study':<36}{'one after another':>19}{'side by side':>14}{'ratio':>8}"
          f"{f'starts x{args.start_slowdown:g}':>14}{'ratio':>8}")
    schedules = []
    for name, arms, parallel in STUDIES:
        demands = [ArmDemand.from_engine(a, engine) for a in arms]
        try:
            reference = simulate(plan_device_sets(demands, pool, 1), {a: seconds[a] for a in arms})
            plan = plan_device_sets(demands, pool, parallel, args.arms_per_gpu)
        except UserError as exc:
            sys.exit(f"error: {exc}")
        result = simulate(plan, {a: seconds[a] for a in arms})
        pessimistic = simulate(plan, {a: slowed[a] for a in arms})
        assert reference.makespan == result.sequential  # one after another = the sum
        print(f"{name:<36}{reference.makespan:>18.0f}s{result.makespan:>13.0f}s"
              f"{result.makespan / reference.makespan:>7.2f}x"
              f"{pessimistic.makespan:>13.0f}s{pessimistic.makespan / reference.makespan:>7.2f}x")
        schedules.append((name, result))
    for name, result in schedules:
        print(f"\n{name}: arm, GPUs, start - end")
        for t in result.arms:
            print(f"  {t.arm:<28}{','.join(t.devices):<6}{t.start:>7.0f}s - {t.end:.0f}s")
    print(f"\nstarts x{args.start_slowdown:g}: every engine start of the side-by-side schedule "
          "slowed by that factor (arms reading weights from one disk and compiling on shared "
          "host CPUs at once); the simulation itself assumes arms on disjoint GPUs do not slow "
          "each other." + (" Arms sharing a GPU do slow each other (they share its compute "
                           "and memory bandwidth), which the simulation does not model: give "
                           "--times measured with the arms sharing." if args.arms_per_gpu > 1
                           else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
