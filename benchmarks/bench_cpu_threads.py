"""What OpenMP's wait policy costs an engine on vLLM's CPU backend beside another busy
process (the next arm importing, a second pytest worker, a CI job's other work).

    python benchmarks/bench_cpu_threads.py [--items 1200] [--repeats 3]

Generates the shared-prefix task's prompts (greedy, 8 tokens) with the shipped model, one
fresh process per measurement, alone and beside a process that keeps one core busy, with
OpenMP's default wait policy (threads spin while they wait) and with OMP_WAIT_POLICY=
PASSIVE (they sleep). Ratios are against the default policy alone, in the same run. Here
the spinning engine took 2.9x as long beside the busy process, the passive one 1.7x, and
alone the passive one 1.06x: why the engine tests, whose two streams always run beside
each other, set it (tests/engine/engine_helpers.py), and the shipped configs, whose arms
run their measured tasks alone, do not.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DTYPE_BENCH = ROOT / "benchmarks" / "bench_cpu_dtype.py"  # its --one generates once


def one(policy: str | None, busy: bool, items: int) -> float:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    env.pop("OMP_WAIT_POLICY", None)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        done = subprocess.run([sys.executable, str(DTYPE_BENCH), "--one", "bfloat16",
                               "--items", str(items)], capture_output=True, text=True, env=env,
                              cwd=ROOT)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    lines = [line for line in done.stdout.splitlines() if line.startswith("GENERATE_SECONDS")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"policy {policy} (busy={busy}) failed:\n{done.stderr[-3000:]}")
    return float(lines[-1].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    variants = [(policy, busy) for busy in (False, True) for policy in (None, "PASSIVE")]
    seconds: dict = {v: [] for v in variants}
    for _ in range(args.repeats):  # interleaved, so drift in the machine hits every variant
        for variant in variants:
            seconds[variant].append(one(*variant, args.items))
    reference = statistics.median(seconds[(None, False)])
    print(f"{args.items} shared-prefix prompts, bf16, median of {args.repeats}, against the "
          "default wait policy alone:")
    for (policy, busy), values in seconds.items():
        median = statistics.median(values)
        where = "beside a busy core" if busy else "alone"
        print(f"  OMP_WAIT_POLICY={policy or '(default)':<9} {where:<19} {median:6.2f} s  "
              f"{median / reference:5.2f}x")


if __name__ == "__main__":
    main()
