"""Suite overhead: wall time of `python -m evals ab CONFIG` divided by the wall time of the two
equivalent plain lm-eval CLI runs (same model, engine args, tasks, limit), both measured in
this run on this machine. Target: at most 1.10.

Offline arms are compared with `lm_eval run --model vllm --batch_size auto`: all requests
handed to vLLM at once, as the suite's runner does (lm-eval's default batch size 1 sends
one request at a time; on an H200 each plain arm then took longer than the suite's two).
Server-mode arms (e.g. configs/cpu/mtp_prefix_serving.yaml, run here without its cache
stress) are compared with what a user does by hand: start `vllm serve` with the same flags,
wait for it, run `lm_eval run --model local-completions` against it with the same
concurrency, stop it.

Usage: python benchmarks/bench_overhead.py [CONFIG] [--limit N] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evals.plan.config import load_config  # noqa: E402


def model_args(model: str, engine: dict, seed: int) -> str:
    """lm-eval's CLI takes --model_args as JSON, which keeps nested engine arguments intact."""
    return json.dumps({"pretrained": model, "seed": seed, **engine})


def plain_server_run(config, arm: str, tasks: str, limit: int, output: Path, env: dict) -> float:
    """`vllm serve` + `lm_eval run --model local-completions` against it, timed together."""
    from evals.runner.server import SERVED_NAME, VllmServer

    spec = config.arm(arm)
    started = time.perf_counter()
    with VllmServer(config.arm_model(arm), dict(spec.engine), output / "server.log",
                    seed=config.seed, env=env) as server:
        args = ",".join([f"base_url={server.base_url}/v1/completions", f"model={SERVED_NAME}",
                         f"tokenizer={config.arm_model(arm)}", "tokenizer_backend=huggingface",
                         f"num_concurrent={spec.concurrency}", "max_retries=2",
                         f"max_length={spec.engine.get('max_model_len', 2048)}"])
        timed([sys.executable, "-m", "lm_eval", "run", "--model", "local-completions",
               "--model_args", args, "--tasks", tasks, "--include_path", str(ROOT / "tasks"),
               "--limit", str(limit), "--log_samples", "--output_path", str(output),
               "--seed", str(config.seed)], env)
    return time.perf_counter() - started


def timed(cmd: list[str], env: dict) -> float:
    started = time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    print(f"  {elapsed:7.1f} s  {' '.join(cmd[1:4])}", flush=True)
    if result.returncode not in (0, 1, 3):
        sys.exit(f"command failed ({result.returncode}): {' '.join(cmd)}\n{result.stderr[-3000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="configs/cpu/kv_fp8.yaml")
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    config = load_config(args.config)
    tasks = ",".join(t.name for t in config.tasks)
    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    patched = work / "config.yaml"
    data = json.loads(config.model_dump_json())
    data.update(limit=args.limit, name=config.name + "-bench")
    for arm in ("baseline", "candidate"):
        data["arms"][arm]["cache_stress"] = False  # extra work plain lm-eval does not do
    data.pop("source", None)
    patched.write_text(json.dumps(data))
    rows = []
    for repeat in range(args.repeats):
        plain = 0.0
        for arm in ("baseline", "candidate"):
            env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
                   "VLLM_LOGGING_LEVEL": "WARNING", **config.arm(arm).env}
            # the suite records vLLM's counters; give plain lm-eval the same engine setting
            engine = {**config.arm(arm).engine, "disable_log_stats": False}
            if config.arm(arm).mode == "server":
                plain += plain_server_run(config, arm, tasks, args.limit,
                                          work / f"plain-{repeat}-{arm}", env)
                continue
            plain += timed([sys.executable, "-m", "lm_eval", "run", "--model", "vllm",
                            "--model_args", model_args(config.arm_model(arm), engine, config.seed),
                            "--tasks", tasks, "--include_path", str(ROOT / "tasks"), "--limit",
                            str(args.limit), "--batch_size", "auto", "--log_samples",
                            "--output_path", str(work / f"plain-{repeat}-{arm}"),
                            "--seed", str(config.seed)], env)
        suite = timed([sys.executable, "-m", "evals", "ab", str(patched), "--fresh", "--reports",
                       str(work / f"suite-{repeat}")], dict(os.environ))
        rows.append((repeat, plain, suite, suite / plain))
    print(f"config {args.config}, tasks {tasks}, limit {args.limit} items per task")
    print(f"{'repeat':>6}  {'plain lm_eval x2 (s)':>20}  {'suite ab (s)':>12}  {'ratio':>6}")
    for repeat, plain, suite, ratio in rows:
        print(f"{repeat:>6}  {plain:>20.1f}  {suite:>12.1f}  {ratio:>6.3f}")
    total_ratio = sum(r[2] for r in rows) / sum(r[1] for r in rows)
    print(f"overall ratio suite / plain: {total_ratio:.3f} (target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
