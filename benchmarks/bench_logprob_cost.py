"""What recording top-k log-probabilities (`logprobs: k`) costs an arm: the wall time of
the same arm's generation requests with and without `logprobs=k`, in one engine,
alternating, so both see the same machine state.

    python benchmarks/bench_logprob_cost.py [CONFIG] [--k 5] [--repeats 3] [--limit 1200]

The requests are those the suite sends: lm-eval's own `vllm` model (the runner's
`open_backend`, evals.runner.backends) runs the config's baseline generation tasks, once
with the capture on (vLLM computes and returns the top-k per token; the capture matches
and keeps them) and once without, `repeats` times in turn. Multiple-choice tasks are left
out: their per-choice log-likelihoods come with lm-eval's samples anyway.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "configs/cpu/aa.yaml"))
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=1200)
    args = parser.parse_args()

    import os

    from evals.plan.config import load_config
    from evals.dispatch.arms import arm_specs

    config = load_config(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        spec = replace(arm_specs(config, Path(tmp))["baseline"], logprobs=args.k,
                       limit=args.limit)
        os.environ.update(spec.env)
        from lm_eval import simple_evaluate
        from lm_eval.tasks import TaskManager

        from evals.runner.backends import open_backend
        from evals.runner.layout import ArmLayout

        manager = TaskManager(include_path=list(spec.include_paths))
        tasks = [t.name for t in config.tasks if "mc" not in t.name]
        with ExitStack() as stack:
            backend = open_backend(spec, ArmLayout(Path(tmp) / "arm"), stack, False)  # no progress bar
            capture = backend.capture
            rows = {True: [], False: []}
            for repeat in range(args.repeats + 1):  # the first round warms up, not counted
                for on in (True, False):
                    capture.enabled = on
                    started = time.perf_counter()
                    simple_evaluate(model=backend.lm, tasks=tasks, limit=args.limit,
                                    num_fewshot=spec.num_fewshot, task_manager=manager,
                                    random_seed=spec.seed, numpy_random_seed=spec.seed,
                                    torch_random_seed=spec.seed, fewshot_random_seed=spec.seed,
                                    bootstrap_iters=0)
                    elapsed = time.perf_counter() - started
                    capture.clear()
                    if repeat:
                        rows[on].append(elapsed)
                        print(f"repeat {repeat} logprobs={'%d' % args.k if on else 'off':>3}: "
                              f"{elapsed:6.2f} s", flush=True)
    on, off = statistics.median(rows[True]), statistics.median(rows[False])
    print(f"tasks {', '.join(tasks)}, {args.limit} items each, {args.repeats} repeats")
    print(f"median wall: logprobs={args.k} {on:.2f} s, off {off:.2f} s; "
          f"ratio {on / off:.3f} (cost {100 * (on / off - 1):+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
