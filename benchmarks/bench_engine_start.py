"""Where an engine start goes on this machine: the shipped tiny model, one fresh process per
variant, each stage timed. The reference is vLLM's default start (engine core in a second
process, torch.compile) with lm-eval's full task index, measured in the same run; each
variant is reported as a ratio to it.

    python benchmarks/bench_engine_start.py

Stages: import torch, vllm and lm-eval; lm-eval's task index (all of lm-eval's tasks plus
tasks/, or tasks/ only); `vllm.LLM(...)`; the first generate of 8 prompts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "tiny-reviews"
VARIANTS = {
    # name: (enforce_eager, engine core in process, index lm-eval's own tasks too)
    "vLLM default (reference)": (False, False, True),
    "enforce_eager": (True, False, True),
    "engine core in process": (False, True, True),
    "bundled-task index only": (False, False, False),
    "all three (the engine tests)": (True, True, False),
    "shipped CPU configs": (False, True, False),
}


def _child(eager: bool, inproc: bool, defaults: bool) -> dict:
    stages: dict[str, float] = {}
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        stages[name] = round(now - mark, 2)
        mark = now

    import torch  # noqa: F401
    lap("import torch")
    import vllm
    lap("import vllm")
    from lm_eval.tasks import TaskManager
    lap("import lm-eval")
    TaskManager(include_path=[str(ROOT / "tasks")], include_defaults=defaults)
    lap("task index")
    llm = vllm.LLM(model=str(MODEL), dtype="bfloat16", max_model_len=1024, seed=1234,
                   enforce_eager=eager, enable_prefix_caching=False)
    lap("LLM(...)")
    llm.generate(["Add: 47 + 15 ="] * 8, vllm.SamplingParams(max_tokens=8, temperature=0),
                 use_tqdm=False)
    lap("first generate")
    return stages


def _run(eager: bool, inproc: bool, defaults: bool) -> dict:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1",
           "VLLM_LOGGING_LEVEL": "ERROR", "VLLM_ENABLE_V1_MULTIPROCESSING": "0" if inproc else "1"}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps([eager, inproc, defaults])],
                         env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    stages = json.loads(out.stdout.strip().splitlines()[-1])
    stages["process total"] = round(time.perf_counter() - started, 2)
    return stages


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_child(*json.loads(sys.argv[2]))), flush=True)
        sys.exit(0)
    results = {name: _run(*flags) for name, flags in VARIANTS.items()}
    reference = results["vLLM default (reference)"]["process total"]
    names = list(next(iter(results.values())))
    print(f"{'variant':<30}" + "".join(f"{n:>16}" for n in names) + f"{'vs reference':>14}")
    for name, stages in results.items():
        print(f"{name:<30}" + "".join(f"{stages[n]:>15.1f}s" for n in names)
              + f"{stages['process total'] / reference:>13.2f}x")
