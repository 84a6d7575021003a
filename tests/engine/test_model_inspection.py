"""vLLM inspects a model class it has not met in a fresh interpreter (~10 CPU-seconds of
imports); a process forked by a fork server has its inspections forked by the same server
instead (evals.runner.model_inspection). Checked on the real vLLM and the embedded model's
class, through the session's fork server, in an offline arm's environment."""

from __future__ import annotations

import json

from engine_helpers import CPU_ENV, ENGINE, MODEL

from evals.plan.arm_spec import ArmSpec
from evals.runner import fork_server
from evals.runner.launch import REPO_ROOT, worker_env
from evals.runner.worker_imports import FORK_MODULES


def test_an_inspection_runs_in_a_sibling_fork_and_gives_vllms_answer(tmp_path, fork_servers):
    architecture = json.loads((MODEL / "config.json").read_text())["architectures"][0]
    spec = ArmSpec(arm="inspection", model=str(MODEL), engine=ENGINE, env=CPU_ENV,
                   tasks=("tiny_addition",), limit=None, num_fewshot=0, seed=1234,
                   include_paths=(), output_dir=str(tmp_path))
    probe = fork_server.fork(fork_servers, ["-m", "tests.engine.inspection_probe", architecture],
                             worker_env(spec), str(REPO_ROOT), modules=FORK_MODULES)
    output, _ = probe.communicate(timeout=600)
    assert probe.returncode == 0, output[-3000:]
    result = json.loads(output.strip().splitlines()[-1])
    assert result["routed"] is True
    # another child of the probe's own fork server: neither the probe nor a child of it
    assert result["where"]["parent"] == result["server"] == probe.server_pid
    assert result["where"]["pid"] != result["pid"]
    assert result["architecture"] == architecture and result["same_as_here"] is True
    # a failing inspection is vLLM's RuntimeError, with the child's traceback
    assert result["failure"].startswith("Error raised in subprocess:")
    assert "ZeroDivisionError" in result["failure"]
