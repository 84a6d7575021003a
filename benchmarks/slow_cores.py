"""Run a command on this machine's cores made a fixed factor slower, to stand in for a slower CPU.

    python benchmarks/slow_cores.py --slowdown 1.52 -- nox -s tests
    python benchmarks/slow_cores.py --slowdown 1.52 --calibrate

Why: the suite's 15-minute budget must hold on the slowest CPU kind this project's machines
have been seen with (a 2-core AVX2-only AMD EPYC 7B12, Zen 2, which ran the quick tier 1.52x
slower than a 2-core AVX-512 EPYC: 6m23s against 4m12s), and such a machine cannot be had on
demand. `benchmarks/avx2_emulation` reproduces its instruction set (kernels, dtypes,
refusals); this reproduces its speed.

How: one process per core, pinned to it and scheduled SCHED_FIFO (so it preempts everything
else there), busy for a fraction f = 1 - 1/slowdown of every 10 ms period and asleep for the
rest. Whatever else runs on that core gets 1 - f of it, in slices of at most 10 ms, so a
single-threaded stretch is slowed as much as a saturated one, which a CPU quota (a cgroup's
cfs_quota) would not do. What is not reproduced: the other CPU's caches, memory bandwidth and
how its speed differs between kinds of code (the factor is one number, measured on the quick
tier); the stolen share is measured and printed, not assumed.

Needs root (SCHED_FIFO; each stealer reports whether it got it, so the refusal is certain
however slow the machine) and leaves the real-time budget (sched_rt_runtime_us, 95% by default)
to bound the share. Writes nothing but its report to stderr; the command's exit code is its own.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

PERIOD_S = 0.010
STARTUP_TIMEOUT_S = 30.0
CALIBRATION_LOOPS = 20_000_000


def _steal(cpu: int, busy_s: float, period_s: float, priority: int, ready) -> None:
    os.sched_setaffinity(0, {cpu})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        ready.send(False)
        return
    ready.send(True)
    ready.close()
    clock = time.monotonic  # one clock for every core: all of them are taken at the same time,
    while True:             # so a thread cannot escape to a core that is free at that moment
        now = clock()
        start = now - now % period_s
        end_busy = start + busy_s
        while clock() < end_busy:
            pass
        pause = start + period_s - clock()
        if pause > 0:
            time.sleep(pause)


class SlowCores:
    """Context manager: the stealing processes run while inside it."""

    def __init__(self, slowdown: float, period_s: float = PERIOD_S, priority: int = 1):
        if slowdown < 1.0:
            raise ValueError(f"slowdown must be at least 1.0, got {slowdown}")
        self.slowdown = slowdown
        self.busy_s = period_s * (1.0 - 1.0 / slowdown)
        self.period_s = period_s
        self.priority = priority  # SCHED_FIFO's: a higher one preempts a lower one
        self.cpus = sorted(os.sched_getaffinity(0))
        self._procs: list[multiprocessing.Process] = []
        self._started = 0.0
        self.share = 0.0  # the share really taken, measured on leaving

    def __enter__(self) -> SlowCores:
        if self.busy_s <= 0:
            return self
        ctx = multiprocessing.get_context("fork")
        answers = []
        for cpu in self.cpus:
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_steal, daemon=True,
                               args=(cpu, self.busy_s, self.period_s, self.priority, send))
            proc.start()
            send.close()  # the stealer holds the only sending end: its death reads as EOF
            self._procs.append(proc)
            answers.append(receive)
        scheduled = []
        for receive in answers:  # each stealer says whether it got SCHED_FIFO, however slow
            try:
                scheduled.append(receive.poll(STARTUP_TIMEOUT_S) and receive.recv())
            except EOFError:
                scheduled.append(False)
            receive.close()
        self._started = time.monotonic()
        if not all(scheduled):
            self._stop()
            raise RuntimeError("a core stealer was refused SCHED_FIFO: SCHED_FIFO needs root "
                               "(or CAP_SYS_NICE, or an RLIMIT_RTPRIO above 0)")
        return self

    def stolen_share(self) -> float:
        """The stealers' CPU time over the cores' wall time since they started (from /proc)."""
        if not self._procs:
            return 0.0
        ticks = os.sysconf("SC_CLK_TCK")
        used = 0.0
        for proc in self._procs:
            with open(f"/proc/{proc.pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            used += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        wall = time.monotonic() - self._started
        return used / (wall * len(self._procs))

    def __exit__(self, *exc) -> None:
        self.share = self.stolen_share()
        self._stop()

    def _stop(self) -> None:
        for proc in self._procs:
            proc.kill()
            proc.join()


def _loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def _timed_pool() -> float:
    """Wall seconds for one pure-Python loop per core, all cores at once."""
    ctx = multiprocessing.get_context("fork")
    cpus = len(os.sched_getaffinity(0))
    start = time.perf_counter()
    procs = [ctx.Process(target=_loop, args=(CALIBRATION_LOOPS,)) for _ in range(cpus)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    return time.perf_counter() - start


def _timed_single() -> float:
    start = time.perf_counter()
    _loop(CALIBRATION_LOOPS)
    return time.perf_counter() - start


def calibrate(slowdown: float, repeats: int = 7) -> None:
    """Prints the measured slowdown of a single-threaded and an all-cores pure-Python loop
    (this machine's own speed varies from minute to minute: read it as a rough check)."""
    for name, timed in (("one process", _timed_single), ("one process per core", _timed_pool)):
        plain, slow = [], []
        for _ in range(repeats):
            plain.append(timed())
            with SlowCores(slowdown):
                slow.append(timed())
        plain_s, slow_s = statistics.median(plain), statistics.median(slow)
        print(f"{name}: {plain_s:.3f} s plain, {slow_s:.3f} s slowed (medians of {repeats}): "
              f"{slow_s / plain_s:.2f}x (asked {slowdown:.2f}x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--slowdown", type=float, required=True,
                        help="how many times slower every core should run (1.52: the AVX2 EPYC)")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure the slowdown on a pure-Python loop instead of running a command")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.calibrate:
        calibrate(args.slowdown)
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give a command after --")
    start = time.monotonic()
    with SlowCores(args.slowdown) as cores:
        rc = subprocess.call(command)
    print(f"slow_cores: {' '.join(command)} exited {rc} after {time.monotonic() - start:.0f} s; "
          f"cores stolen {cores.share:.1%} (asked {1 - 1 / args.slowdown:.1%}, "
          f"{args.slowdown:.2f}x slower)", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
