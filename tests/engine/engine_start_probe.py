"""Run by test_fork_preload.py in a process forked by the engine tests' fork server: starts
an offline engine of the embedded model as an arm's worker does (engine core in this
process, the machine's engine lock held), generates, and prints one JSON line: which of
evals.runner.vllm_compat.engine_modules() this process had before the start (the server's
preload), the worker class vLLM picked, and the vLLM modules the start imported."""

from __future__ import annotations

import json
import os
import sys


def main(model: str, engine_json: str) -> None:
    before = set(sys.modules)
    from evals.runner import vllm_compat
    from evals.runner.engine_lock import EngineLock

    with EngineLock():
        from vllm import LLM, SamplingParams

        llm = LLM(model=model, seed=0, **json.loads(engine_json))
        worker_cls = llm.llm_engine.vllm_config.parallel_config.worker_cls
        out = llm.generate(["1+1="], SamplingParams(max_tokens=2, temperature=0))
    if not isinstance(worker_cls, str):
        worker_cls = f"{worker_cls.__module__}.{worker_cls.__qualname__}"
    new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] == "vllm")
    preloaded = vllm_compat.engine_modules()
    print(json.dumps({"engine_modules": list(preloaded),
                      "had_before": sorted(set(preloaded) & before),
                      "worker_cls": worker_cls, "new_vllm_modules": new,
                      "generated": len(out[0].outputs[0].token_ids)}), flush=True)
    os._exit(0)  # as a worker ends (evals.runner.worker.exit_now): no engine shutdown


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
