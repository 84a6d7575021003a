"""What bf16 and float32 cost the embedded model on this CPU, measured here.

    python benchmarks/bench_cpu_dtype.py [--items 600] [--repeats 2]

Generates the shared-prefix task's prompts (greedy, 8 tokens) with the shipped model on
vLLM's CPU backend, one fresh process per dtype, interleaved. The ratio is float32 against
bf16, measured in the same run, on this CPU kind only: run it on each kind (AVX2-only,
AVX-512, AVX-512 + AMX) to compare them; the engine tests run float32 on a CPU without
AVX-512 BF16 (tests/engine/engine_helpers.py), where oneDNN has no bf16 GEMM kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(dtype: str, items: int) -> None:
    """One variant, in this process: prints the generation's wall seconds."""
    from vllm import LLM, SamplingParams

    prefix = (ROOT / "tasks/embedded/data/shared_prefix.txt").read_text(encoding="utf-8")
    lines = (ROOT / "tasks/embedded/data/reviews_test.jsonl").read_text().splitlines()[:items]
    prompts = [f"{prefix}\n\nReview: {json.loads(line)['text']}\nSentiment:" for line in lines]
    llm = LLM(str(ROOT / "models/tiny-reviews"), dtype=dtype, max_model_len=1024,
              enforce_eager=True, block_size=32, enable_prefix_caching=False, seed=0)
    started = time.perf_counter()
    llm.generate(prompts, SamplingParams(max_tokens=8, temperature=0), use_tqdm=False)
    print(f"GENERATE_SECONDS {time.perf_counter() - started:.3f}", flush=True)
    os._exit(0)  # vLLM's teardown is not measured


def one(dtype: str, items: int) -> float:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    done = subprocess.run([sys.executable, __file__, "--one", dtype, "--items", str(items)],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("GENERATE_SECONDS")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{dtype} failed:\n{done.stderr[-3000:]}")
    return float(lines[-1].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        generate(args.one, args.items)
        return
    dtypes = ("bfloat16", "float32")
    seconds: dict = {d: [] for d in dtypes}
    for _ in range(args.repeats):  # interleaved, so drift in the machine hits both
        for dtype in dtypes:
            seconds[dtype].append(one(dtype, args.items))
    reference = statistics.median(seconds["bfloat16"])
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    print(f"{args.items} shared-prefix prompts on {cpu}, median of {args.repeats}, "
          "against bf16:")
    for dtype, values in seconds.items():
        median = statistics.median(values)
        print(f"  {dtype:<9} {median:6.2f} s  {median / reference:5.2f}x")


if __name__ == "__main__":
    main()
