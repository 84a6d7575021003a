"""On a CPU a fork server imports what vLLM imports when it starts an engine (its engine core,
scheduler and CPU worker: evals.runner.vllm_compat.import_engine_modules,
an entry of FORK_MODULES), so a forked arm's engine turn does not import them under the
engine lock (benchmarks/bench_fork_preload.py: an engine start 1.18 s against 1.84 s).
Checked on the real vLLM: an engine started in a forked child, as an arm's worker starts it,
finds them imported, and the worker class vLLM picks on this platform is among them."""

from __future__ import annotations

import json

from engine_helpers import ENGINE, MODEL, run_forked_probe, save_artifact

from evals.runner.worker_imports import FORK_MODULES


def test_a_forked_engine_start_finds_vllms_engine_modules_imported(tmp_path, fork_servers):
    assert "evals.runner.vllm_compat:import_engine_modules" in FORK_MODULES
    result, _ = run_forked_probe(fork_servers, tmp_path, "tests.engine.engine_start_probe",
                                 str(MODEL), json.dumps(ENGINE))
    save_artifact("fork_preload.json", result)
    assert result["generated"] == 2
    # the worker class vLLM picked for this platform is in a module the server imported
    worker_module = result["worker_cls"].rpartition(".")[0]
    assert worker_module in result["engine_modules"], result["worker_cls"]
    # every one of them was imported before the engine started (so none by the start)
    assert result["had_before"] == sorted(result["engine_modules"])
