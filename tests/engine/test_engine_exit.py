"""An arm whose engine core runs in a process of its own - vLLM's default, and on a GPU the
only mode - ends within seconds of its last result and leaves no engine process behind
(evals.runner.vllm_compat.shutdown_engine, evals.runner.worker.exit_now). On an H200 the
worker of an MTP + prefix-caching arm used to hang in Python's multiprocessing exit
handler, joining the engine core that nothing had stopped; the CPU configs run the engine
in the worker (VLLM_ENABLE_V1_MULTIPROCESSING=0), so this test turns it back on."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Timeout

import psutil
import pytest
from engine_helpers import CPU_ENV, ENGINE, MODEL, REPO

from evals.plan.arm_spec import ArmSpec
from evals.runner.fork_server import FORK_SERVER_ENV
from evals.runner.launch import run_arm

MTP = {"method": "mtp", "num_speculative_tokens": 1}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _engine_processes_since(started: float) -> list:
    """vLLM's engine processes (titled VLLM::...) started since `started`."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "create_time"]):
        title = " ".join(process.info["cmdline"] or []) or process.info["name"] or ""
        if title.startswith("VLLM::") and process.info["create_time"] >= started - 1:
            found.append(process)
    return found


def test_an_engine_core_in_its_own_process_ends_with_its_arm(tmp_path, monkeypatch):
    monkeypatch.delenv(FORK_SERVER_ENV, raising=False)  # a fresh interpreter, as users run
    spec = ArmSpec(
        arm="candidate", model=str(MODEL),
        engine={**ENGINE, "enable_prefix_caching": True, "block_size": 32,
                "speculative_config": MTP},
        env={**CPU_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
        tasks=("tiny_reviews_shared_prefix",), limit=24, num_fewshot=0, seed=1234,
        include_paths=(str(REPO / "tasks"),), output_dir=str(tmp_path / "arm")).with_fingerprint()
    started = time.time()
    with ThreadPoolExecutor(1) as pool:  # returns once the worker process has exited
        running = pool.submit(run_arm, spec)
        try:
            layout = running.result(timeout=300)
        except Timeout:
            left = _engine_processes_since(started)
            for process in left:
                process.kill()
            pytest.fail(f"the arm did not end within 300 s; killed {len(left)} vLLM "
                        "process(es) left running")
    returned = time.time()
    manifest = layout.read_manifest()
    engines = manifest["engine_processes"]
    assert engines, "the engine core did not run in a process of its own"
    exit_seconds = returned - manifest["timeline"]["finished"]
    assert exit_seconds < 20, f"the worker took {exit_seconds:.1f} s to exit after its results"
    assert not [pid for pid in engines if _alive(pid)], "an engine process outlived its arm"
    # it really was the MTP + prefix-caching engine, and it ran the task
    record = layout.task_record("tiny_reviews_shared_prefix")
    assert record["exercise"]["vllm:prefix_cache_hits"] > 0
    assert manifest["spec_decode"]["vllm:spec_decode_num_accepted_tokens"] > 0
    assert record["requests"] == 24
