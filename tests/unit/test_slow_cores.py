"""benchmarks/slow_cores.py: real SCHED_FIFO stealers take the share asked of every core,
and leave nothing behind; without root, a clear refusal (checked as root too, in a child
that gave up the capability root uses)."""

import ctypes
import importlib.util
import os
import resource
import time
from pathlib import Path

import pytest

CAP_SYS_NICE = 23
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
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
    # priority 2: under `slow_cores.py -- nox -s tests` its own stealers (priority 1) share
    # these cores, and would otherwise take part of the time these ask for
    with slow_cores.SlowCores(2.0, priority=2) as cores:
        pids = [p.pid for p in cores._procs]
        assert len(pids) == len(os.sched_getaffinity(0))
        time.sleep(1.5)
    # half of every core, counted by the kernel (clock ticks of 10 ms over 1.5 s each)
    assert 0.40 <= cores.share <= 0.60, cores.share
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}"), pid


def _give_up_cap_sys_nice() -> None:
    """Clears CAP_SYS_NICE from this process's effective and permitted capabilities
    (capget/capset, version 3): a root process so placed may not take SCHED_FIFO while
    RLIMIT_RTPRIO is 0, as any other user may not, and can still read root's files."""
    libc = ctypes.CDLL(None, use_errno=True)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(_LINUX_CAPABILITY_VERSION_3, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    data[0].effective &= ~(1 << CAP_SYS_NICE)
    data[0].permitted &= ~(1 << CAP_SYS_NICE)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def test_without_root_it_says_why():
    """Checked on every machine: as root, in a forked child that first gives up CAP_SYS_NICE,
    the capability by which root may use SCHED_FIFO."""
    assert resource.getrlimit(resource.RLIMIT_RTPRIO)[0] == 0, "any user could take SCHED_FIFO"
    pid = os.fork()
    if pid == 0:  # the child reports by its exit code only
        code = 3
        try:
            if os.geteuid() == 0:
                _give_up_cap_sys_nice()
            code = 5
            try:
                with slow_cores.SlowCores(2.0):
                    code = 2
            except RuntimeError as error:
                code = 0 if "SCHED_FIFO needs root" in str(error) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code == 0, {1: "another RuntimeError", 2: "no refusal: the stealers started",
                       3: "the child could not give up CAP_SYS_NICE",
                       5: "another exception"}.get(code, status)
