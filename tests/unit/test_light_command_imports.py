"""The light commands read finished runs: `compare` (two lm-eval output folders) and `release`
(a policy over recorded runs) must not import what they do not use - no engine, lm-eval or
HTTP client, no pandas or statsmodels (each cost every run 0.3-1 s and ~50 MiB beside
NeMo Evaluator's `nel compare` / `nel gate`: benchmarks/bench_light_commands.py), and none of
the run stage's modules. Checked on the real CLI in a fresh process, not timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LM_EVAL_RUN = ROOT / "tests" / "fixtures" / "lm_eval_run"
POLICY = ROOT / "examples" / "release" / "policy.yaml"
MTP_RUN = ROOT / "benchmarks" / "results" / "gpu-h200" / "gpu-mtp-prefix-0c0dac60"

HEAVY = {"torch", "vllm", "lm_eval", "transformers", "datasets", "pandas", "statsmodels",
         "requests", "aiohttp", "psutil", "matplotlib"}
RUN_STAGE = {"evals.dispatch.arms", "evals.runner.launch", "evals.runner.server",
             "evals.runner.fork_server", "evals.runner.worker"}


def _imported(args: list[str]) -> tuple[int, list[str]]:
    """Runs `python -m evals ARGS` in a fresh process; its exit code and what it imported
    of HEAVY (top-level packages) and RUN_STAGE."""
    code = ("import json, sys; from evals.cli import main\n"
            f"rc = main({args!r})\n"
            f"top = {{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})\n"
            f"stage = set(sys.modules) & set({sorted(RUN_STAGE)!r})\n"
            "print(json.dumps([rc, sorted(top | stage)]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    rc, found = json.loads(result.stdout.strip().splitlines()[-1])
    return rc, found


def test_compare_imports_only_what_a_reader_of_outputs_needs(tmp_path):
    rc, found = _imported(["compare", str(LM_EVAL_RUN), str(LM_EVAL_RUN), "--reports",
                           str(tmp_path / "reports"), "--store", str(tmp_path / "store")])
    assert rc == 3 and (tmp_path / "store").is_dir()  # it ran to its end: analysed, recorded
    assert found == []


def test_release_imports_only_what_a_reader_of_runs_needs(tmp_path):
    rc, found = _imported(["release", str(POLICY), str(MTP_RUN), "--out", str(tmp_path / "o"),
                           "--as-of", "2026-12-06"])
    assert rc == 0 and (tmp_path / "o" / "release.json").exists()
    assert found == []
