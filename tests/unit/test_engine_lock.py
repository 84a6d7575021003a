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
print("ready", flush=True)
with EngineLock() as lock:
    print(f"got it after {lock.waited_seconds:.6f} s at {time.time():.6f}", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def _take(lock_path: str | None, hold: float = 0.0) -> subprocess.Popen:
    env = {"PYTHONPATH": str(REPO)}
    if lock_path:
        env["EVALS_ENGINE_LOCK"] = lock_path
    return subprocess.Popen([sys.executable, "-c", TAKER, str(hold)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, text=True)


def _ready(proc: subprocess.Popen) -> subprocess.Popen:
    """Wait until the taker is about to ask for the lock, then give it time to ask."""
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.5)
    return proc


def _got(proc: subprocess.Popen) -> tuple[float, float]:
    """(seconds the taker waited for the lock, the clock time it got it)."""
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    words = out.split()
    return float(words[-4]), float(words[-1])


def _waited(proc: subprocess.Popen) -> float:
    return _got(proc)[0]


# A loaded machine may take longer to start a taker than a fixed sleep, so the tests wait
# for the taker to say it is about to ask, and compare clock times - the taker got the
# lock only after the holder let go - rather than how long it waited.


def test_a_second_engine_waits_for_the_first(tmp_path):
    path = str(tmp_path / "engine.lock")
    with EngineLock(path):
        second = _ready(_take(path))
        assert second.poll() is None  # still waiting
        released_at = time.time()
    waited, got_at = _got(second)
    assert got_at >= released_at
    assert waited > 0


def test_a_killed_holder_lets_go(tmp_path):
    path = str(tmp_path / "engine.lock")
    first = _ready(_take(path, hold=60))
    assert first.stdout.readline().startswith("got it")
    second = _ready(_take(path))
    assert second.poll() is None
    killed_at = time.time()
    first.kill()
    first.wait()
    waited, got_at = _got(second)
    assert got_at >= killed_at
    assert waited > 0


def test_without_the_variable_nothing_waits(tmp_path):
    with EngineLock(str(tmp_path / "engine.lock")):
        assert _waited(_take(None)) == 0.0


def test_a_lock_file_that_cannot_be_opened_raises_unless_optional(tmp_path):
    missing = str(tmp_path / "missing" / "engine.lock")
    # the engine lock was asked for: a path it cannot open is the user's error, not "no lock"
    with pytest.raises(FileNotFoundError), EngineLock(missing):
        raise AssertionError("entered without the lock")
    with EngineLock(missing, optional=True) as lock:
        assert lock._fd is None and lock.waited_seconds == 0.0
