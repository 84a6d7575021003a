"""vLLM inspects a model class it has not met in a fresh interpreter (~10 CPU-seconds of
imports); a process forked by a fork server has its inspections forked by the same server
instead (evals.runner.model_inspection). Checked on the real vLLM and the embedded model's
class, through the session's fork server, in an offline arm's environment."""

from __future__ import annotations

import json

from engine_helpers import MODEL, run_forked_probe


def test_an_inspection_runs_in_a_sibling_fork_and_gives_vllms_answer(tmp_path, fork_servers):
    architecture = json.loads((MODEL / "config.json").read_text())["architectures"][0]
    result, probe = run_forked_probe(fork_servers, tmp_path, "tests.engine.inspection_probe",
                                     architecture)
    assert result["routed"] is True
    # another child of the probe's own fork server: neither the probe nor a child of it
    assert result["where"]["parent"] == result["server"] == probe.server_pid
    assert result["where"]["pid"] != result["pid"]
    assert result["architecture"] == architecture and result["same_as_here"] is True
    # a failing inspection is vLLM's RuntimeError, with the child's traceback
    assert result["failure"].startswith("Error raised in subprocess:")
    assert "ZeroDivisionError" in result["failure"]
