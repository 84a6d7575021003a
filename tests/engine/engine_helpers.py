"""Helpers of the engine tests: the shipped model, config files, the CLI, artifacts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from evals.hardware import probe

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "tiny-reviews"
ARTIFACTS = REPO / "test-artifacts"
# The engine core runs inside the arm's worker process (no second process importing vLLM
# again: an engine start of ~25 s instead of ~45 s here), as in configs/cpu/base.yaml.
# A 1 GiB KV cache holds ~1.4M tokens of the shipped model, far more than any test needs;
# vLLM zeroes it at every engine start (2 GiB took 2.3 s here, 1 GiB half that).
# OMP_WAIT_POLICY=PASSIVE: OpenMP threads sleep instead of spinning while they wait. The two
# test streams always run beside each other, and a spinning engine beside a busy process
# took 2.9x its time alone, a passive one 1.7x (benchmarks/bench_cpu_threads.py).
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
           "OMP_WAIT_POLICY": "PASSIVE"}
# enforce_eager: no torch.compile at engine start (~7 s less). The engine tests check
# accuracy, reuse, serving and faults, not compilation; the shipped configs compile.
# dtype: bf16 as the shipped configs, except on a CPU without AVX-512, where vLLM's oneDNN
# GEMMs have no bf16 kernel and emulate it: 7x slower than on AVX-512 there, while float32
# runs at about the AVX-512 machine's speed (benchmarks/bench_cpu_dtype.py).
DTYPE = "bfloat16" if probe().avx512 else "float32"
ENGINE = {"dtype": DTYPE, "max_model_len": 1024, "enforce_eager": True}
LIMIT = 200  # one item count for the tests that share the session's run store


def write_config(directory: Path, name: str, baseline: dict, candidate: dict, *,
                 tasks=None, limit: int | None = LIMIT, **extra) -> Path:
    config = {
        "name": name,
        "model": str(MODEL),
        "tasks": tasks or [{"name": "tiny_reviews_gen", "metric": "exact_match"},
                           {"name": "tiny_addition", "metric": "exact_match"}],
        "limit": limit,
        "num_fewshot": 0,  # as configs/cpu/base.yaml: arms of both kinds share stored results
        "seed": 1234,
        "arms": {"baseline": {"env": CPU_ENV, **baseline},
                 "candidate": {"env": CPU_ENV, **candidate}},
        "gate": {"alpha": 0.05, "margin": 0.05},
        **extra,
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def run_cli(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evals", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=timeout)


def read_summary(reports: Path) -> dict:
    (summary,) = list(reports.glob("*/summary.json"))
    return json.loads(summary.read_text(encoding="utf-8"))


def save_artifact(name: str, data) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / name).write_text(json.dumps(data, indent=2, sort_keys=True, default=str))


def run_forked_probe(fork_servers: Path, output_dir: Path, module: str, *args: str):
    """`python -m MODULE ARGS` forked by the session's fork server in an offline arm's
    environment (the engine tests' engine and CPU settings), as an arm's worker is forked.
    Returns its last output line, parsed as JSON, once it has exited 0, and the process."""
    from evals.plan.arm_spec import ArmSpec
    from evals.runner import fork_server
    from evals.runner.launch import REPO_ROOT, worker_env
    from evals.runner.worker_imports import FORK_MODULES

    spec = ArmSpec(arm="probe", model=str(MODEL), engine=ENGINE, env=CPU_ENV,
                   tasks=("tiny_addition",), limit=None, num_fewshot=0, seed=1234,
                   include_paths=(), output_dir=str(output_dir))
    probe = fork_server.fork(fork_servers, ["-m", module, *args], worker_env(spec),
                             str(REPO_ROOT), modules=FORK_MODULES)
    output, _ = probe.communicate(timeout=600)
    assert probe.returncode == 0, output[-3000:]
    return json.loads(output.strip().splitlines()[-1]), probe
