"""The machine's engine lock (evals.runner.engine_lock): with EVALS_ENGINE_LOCK set, a second
process's engine waits until the first process lets go - also when the first is killed;
unset, nothing waits."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from evals.runner.engine_lock import EngineLock

REPO = Path(__file__).resolve().parents[2]

TAKER = """
import sys, time
from evals.runner.engine_lock import EngineLock
with EngineLock() as lock:
    print(f"got it after {lock.waited_seconds:.2f} s", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def _take(lock_path: str | None, hold: float = 0.0) -> subprocess.Popen:
    env = {"PYTHONPATH": str(REPO)}
    if lock_path:
        env["EVALS_ENGINE_LOCK"] = lock_path
    return subprocess.Popen([sys.executable, "-c", TAKER, str(hold)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, text=True)


def _waited(proc: subprocess.Popen) -> float:
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    return float(out.split()[3])


def test_a_second_engine_waits_for_the_first(tmp_path):
    path = str(tmp_path / "engine.lock")
    with EngineLock(path):
        second = _take(path)
        time.sleep(1.5)
        assert second.poll() is None  # still waiting
    assert _waited(second) >= 1.0


def test_a_killed_holder_lets_go(tmp_path):
    path = str(tmp_path / "engine.lock")
    first = _take(path, hold=60)
    assert first.stdout.readline().startswith("got it")
    second = _take(path)
    time.sleep(1.0)
    assert second.poll() is None
    first.kill()
    first.wait()
    assert _waited(second) >= 0.5


def test_without_the_variable_nothing_waits(tmp_path):
    with EngineLock(str(tmp_path / "engine.lock")):
        assert _waited(_take(None)) < 0.5


def test_a_lock_file_that_cannot_be_opened_raises_unless_optional(tmp_path):
    missing = str(tmp_path / "missing" / "engine.lock")
    # the engine lock was asked for: a path it cannot open is the user's error, not "no lock"
    with pytest.raises(FileNotFoundError), EngineLock(missing):
        raise AssertionError("entered without the lock")
    with EngineLock(missing, optional=True) as lock:
        assert lock._fd is None and lock.waited_seconds == 0.0
