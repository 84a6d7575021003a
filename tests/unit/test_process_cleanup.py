"""evals.runner.process_cleanup with real processes: what a dead leader leaves behind in its
session or process group is found and stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from evals.runner.launch import stop_process_group
from evals.runner.process_cleanup import exit_description, kill_process_group, sweep_session

# a leader that starts a grandchild in its own process group (as a worker starts `vllm
# serve`), prints the grandchild's pid, and exits at once: the grandchild is orphaned
ORPHANING = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         process_group=int(sys.argv[1]))
print(child.pid, flush=True)
"""


def _leader(own_group: bool) -> tuple[subprocess.Popen, int]:
    leader = subprocess.Popen([sys.executable, "-c", ORPHANING, "0" if own_group else "-1"],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    orphan = int(leader.stdout.readline())
    leader.wait(timeout=30)
    return leader, orphan


def _gone(pid: int) -> bool:
    for _ in range(50):
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("own_group", [True, False])
def test_the_session_sweep_stops_an_orphan_whose_leader_has_exited(own_group):
    leader, orphan = _leader(own_group)
    assert leader.returncode == 0 and psutil.pid_exists(orphan)
    assert os.getsid(orphan) == leader.pid  # the orphan kept the leader's session
    found = sweep_session(leader.pid)
    assert [line.split()[0] for line in found] == [str(orphan)], found
    assert _gone(orphan)
    assert sweep_session(leader.pid) == []  # nothing left


def test_stopping_an_exited_worker_still_sweeps_what_it_left():
    """The launcher's stop: the worker (the session's leader) has exited; its engine-like
    orphan is stopped all the same (it returned early before)."""
    leader, orphan = _leader(own_group=False)
    left = stop_process_group(leader)
    assert [line.split()[0] for line in left] == [str(orphan)] and _gone(orphan)


def test_a_process_group_is_stopped_after_its_leader_died():
    """The server's stop: `vllm serve` killed, its engine core (same group) left."""
    leader = subprocess.Popen([sys.executable, "-c", ORPHANING, "-1"], stdout=subprocess.PIPE,
                              text=True, process_group=0)
    orphan = int(leader.stdout.readline())
    leader.wait(timeout=30)
    assert os.getpgid(orphan) == leader.pid
    kill_process_group(leader.pid)
    assert _gone(orphan)
    kill_process_group(leader.pid)  # an empty group: nothing to do, no error


def test_exit_descriptions():
    assert exit_description(-signal.SIGKILL) == "was killed by signal 9 (SIGKILL)"
    assert exit_description(3) == "exited with code 3"
    assert exit_description(None) == "is still running"
