"""The resolve lock (evals.runner.config_resolver.one_resolution_at_a_time): vLLM's engine
config is resolved by one process at a time, so the first arm's inspection of a model
class (a subprocess of vLLM's own, ~10 CPU-seconds) fills vLLM's cache before the next
arm looks."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evals.runner import config_resolver

REPO = Path(__file__).resolve().parents[2]
HOLDER = """
import json, sys, time
from pathlib import Path
from evals.runner.config_resolver import one_resolution_at_a_time
with one_resolution_at_a_time(Path(sys.argv[1])):
    started = time.time()
    time.sleep(0.4)
    print(json.dumps([started, time.time()]), flush=True)
"""

# Inside the lock, each holder waits (up to 30 s) until both are inside: both meet only if
# nothing was locked. A loaded machine may start the second interpreter after the first
# has left any fixed span, so the test waits for the meeting instead of comparing times.
MEETING_HOLDER = """
import json, os, sys, time
from pathlib import Path
from evals.runner.config_resolver import one_resolution_at_a_time
room = Path(sys.argv[2])
with one_resolution_at_a_time(Path(sys.argv[1])):
    (room / str(os.getpid())).touch()
    deadline = time.time() + 30
    while len(list(room.iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.05)
    print(json.dumps(len(list(room.iterdir())) == 2), flush=True)
"""


def _held(path: Path) -> bool:
    with open(path, "a") as other:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def test_resolutions_in_two_processes_take_turns(tmp_path):
    lock = tmp_path / "resolve.lock"
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    spans = sorted(json.loads(p.communicate(timeout=60)[0]) for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert spans[0][1] <= spans[1][0], spans  # the second began after the first ended
    assert not _held(lock)  # released when each holder ended


def test_vllm_resolves_the_engine_config_inside_the_lock(tmp_path, monkeypatch):
    from vllm.engine.arg_utils import EngineArgs

    lock = tmp_path / "resolve.lock"
    monkeypatch.setattr(config_resolver, "RESOLVE_LOCK", lock)
    seen = []

    def create_engine_config(self, *args, **kwargs):
        seen.append(_held(lock))
        raise RuntimeError("stop here")

    monkeypatch.setattr(EngineArgs, "create_engine_config", create_engine_config)
    with pytest.raises(RuntimeError, match="stop here"):
        config_resolver.resolve_effective(str(REPO / "models" / "tiny-reviews"),
                                          {"dtype": "float32", "max_model_len": 256})
    assert seen == [True] and not _held(lock)


def test_without_a_writable_folder_nothing_is_locked(tmp_path):
    """A lock file that cannot be opened (its folder is missing) neither raises nor creates
    anything, and two processes holding it run at the same time: nothing waits."""
    lock = tmp_path / "missing" / "resolve.lock"
    entered = []
    with config_resolver.one_resolution_at_a_time(lock):
        entered.append(True)
    assert entered == [True] and not lock.parent.exists()
    room = tmp_path / "room"
    room.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", MEETING_HOLDER, str(lock), str(room)],
                              cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    met = [json.loads(p.communicate(timeout=90)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert met == [True, True]  # both were inside at once: nothing waited
    assert not lock.parent.exists()
