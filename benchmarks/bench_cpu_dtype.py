"""What an AVX2-only CPU costs the embedded model in bf16 and in float32, measured here.

    python benchmarks/bench_cpu_dtype.py [--items 600] [--repeats 2]

Generates the shared-prefix task's prompts (greedy, 8 tokens) with the shipped model on
vLLM's CPU backend, one fresh process per variant: bf16 and float32, each with this CPU's
own kernels and with the kernels an AVX2-only CPU gets (benchmarks/avx2_emulation: vLLM's
`_C_AVX2` build, torch's AVX2 kernels, oneDNN capped at AVX2 by ONEDNN_MAX_CPU_ISA, the
variable oneDNN itself provides for this). Ratios are against bf16 on this CPU, measured
in the same run. On this project's AVX-512 machine the AVX2 dispatch made bf16 about 7x
slower (oneDNN has no bf16 GEMM kernel for AVX2 and converts), float32 about 1.8x: why
the engine tests run float32 on a CPU without AVX-512 (tests/engine/engine_helpers.py).
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
EMULATION = ROOT / "benchmarks" / "avx2_emulation"


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


def one(dtype: str, avx2: bool, items: int) -> float:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    if avx2:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EMULATION),
                                                          env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, __file__, "--one", dtype, "--items", str(items)],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("GENERATE_SECONDS")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{dtype} (avx2={avx2}) failed:\n{done.stderr[-3000:]}")
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
    variants = [(d, avx2) for avx2 in (False, True) for d in ("bfloat16", "float32")]
    seconds: dict = {v: [] for v in variants}
    for _ in range(args.repeats):  # interleaved, so drift in the machine hits every variant
        for variant in variants:
            seconds[variant].append(one(*variant, args.items))
    reference = statistics.median(seconds[("bfloat16", False)])
    print(f"{args.items} shared-prefix prompts, median of {args.repeats}, against bf16 on this "
          "CPU's kernels:")
    for (dtype, avx2), values in seconds.items():
        median = statistics.median(values)
        kernels = "AVX2 kernels" if avx2 else "this CPU's kernels"
        print(f"  {dtype:<9} {kernels:<19} {median:6.2f} s  {median / reference:5.2f}x")


if __name__ == "__main__":
    main()
