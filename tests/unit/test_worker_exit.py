"""The arm worker's exit (evals.runner.worker.exit_now): it leaves once its results are on
disk, skipping the interpreter's teardown (atexit handlers, among them multiprocessing's,
which waits without a timeout for every child it started: the hang of a GPU arm whose
engine core nobody stopped), with its output flushed and its exit code kept. A child still
alive (an engine core that did not stop with its arm) gets CHILD_GRACE_SECONDS to end,
then SIGTERM and SIGKILL: no child outlives the worker."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import atexit, subprocess, sys, time
from evals.runner import worker
# a child that ends by itself within a long grace; the others with a short one to sit out
worker.CHILD_GRACE_SECONDS = 30.0 if sys.argv[1] == "ending" else 2.0
atexit.register(lambda: print("atexit ran", flush=True))
sleep = {"alone": None, "stuck": 60, "ending": 0.5, "deaf": 60}[sys.argv[1]]
code = "import time; print('up', flush=True); time.sleep(%s)" % sleep
if sys.argv[1] == "deaf":  # ignores SIGTERM: only SIGKILL ends it
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + code
child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) if sleep else None
if child is not None:
    child.stdout.readline()  # it runs its sleep now, however long its start took
    print(f"child {child.pid} ", end="")
print("results written", end="")  # unflushed: exit_now must flush it
print(f"exit_now at {time.monotonic()}", file=sys.stderr, flush=True)
worker.exit_now(3)
"""


def _run(mode: str) -> tuple[subprocess.CompletedProcess, float, int | None]:
    """The worker's result, the seconds from its call of exit_now to its end (the clock is
    the machine's: a loaded machine may take far longer to start the interpreter and import
    the worker than the exit takes), and its child's pid."""
    result = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True,
                            text=True, cwd=REPO, timeout=120)
    ended = time.monotonic()
    called = float(result.stderr.split("exit_now at ")[1].split()[0])
    child = int(result.stdout.split()[1]) if result.stdout.startswith("child") else None
    return result, ended - called, child


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_without_children_the_worker_skips_teardown_and_keeps_output_and_code():
    result, _, _ = _run("alone")
    assert result.returncode == 3, result.stderr
    assert result.stdout == "results written"
    assert "atexit ran" not in result.stdout


def test_a_child_that_ends_by_itself_is_waited_for_briefly():
    result, seconds, child = _run("ending")
    assert result.returncode == 3 and result.stdout.endswith("results written"), result.stderr
    assert "atexit ran" not in result.stdout and _gone(child)
    assert seconds < 15.0  # its 0.5 s, not the 30 s grace


def test_a_stuck_child_is_stopped_after_the_grace_period():
    for mode in ("stuck", "deaf"):  # SIGTERM ends the first, only SIGKILL the second
        result, seconds, child = _run(mode)
        assert result.returncode == 3 and result.stdout.endswith("results written"), mode
        assert "atexit ran" not in result.stdout
        assert _gone(child), f"{mode}: the child outlived the worker"
        assert 2.0 <= seconds < 2.0 + 5 + 5, (mode, seconds)
