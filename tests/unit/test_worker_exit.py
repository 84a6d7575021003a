"""The arm worker's exit (evals.runner.worker.exit_now): without child processes it leaves
at once, skipping the interpreter's teardown (atexit handlers), with its output flushed and
its exit code kept; with a child alive (vLLM's engine-core process) it exits normally, so
the exit handlers that stop such children run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import atexit, subprocess, sys
from evals.runner.worker import exit_now
atexit.register(lambda: print("atexit ran", flush=True))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) \\
    if sys.argv[1] == "child" else None
print("results written", end="")  # unflushed: exit_now must flush it
try:
    exit_now(3)
finally:
    if child is not None:
        child.kill()
"""


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_without_children_the_worker_skips_teardown_and_keeps_output_and_code():
    result = _run("alone")
    assert result.returncode == 3, result.stderr
    assert result.stdout == "results written"
    assert "atexit ran" not in result.stdout


def test_with_a_child_alive_the_worker_exits_normally():
    result = _run("child")
    assert result.returncode == 3, result.stderr
    assert result.stdout.startswith("results written")
    assert "atexit ran" in result.stdout
