"""benchmarks/slow_cores.py: real SCHED_FIFO stealers take the share asked of every core,
and leave nothing behind; without root, a clear refusal."""

import importlib.util
import os
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("slow_cores", REPO / "benchmarks" / "slow_cores.py")
slow_cores = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slow_cores)


def test_a_speedup_is_refused():
    with pytest.raises(ValueError, match="at least 1.0"):
        slow_cores.SlowCores(0.5)


def test_no_slowdown_starts_nothing():
    with slow_cores.SlowCores(1.0) as cores:
        assert cores._procs == []
    assert cores.share == 0.0


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is checked below")
def test_stealers_take_the_share_asked_and_end_with_the_block():
    with slow_cores.SlowCores(2.0) as cores:
        pids = [p.pid for p in cores._procs]
        assert len(pids) == len(os.sched_getaffinity(0))
        time.sleep(1.5)
    # half of every core, counted by the kernel (clock ticks of 10 ms over 1.5 s each)
    assert 0.40 <= cores.share <= 0.60, cores.share
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}"), pid


@pytest.mark.skipif(os.geteuid() == 0, reason="root may use SCHED_FIFO: checked above")
def test_without_root_it_says_why():
    with pytest.raises(RuntimeError, match="SCHED_FIFO needs root"), slow_cores.SlowCores(2.0):
        pass
