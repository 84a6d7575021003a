"""Where a test run's wall time goes, seen from the machine's engine lock.

    python benchmarks/suite_profile.py OUT.json -- nox -s tests

runs the command and, every quarter second, asks the kernel (/proc/locks) whether the
engine lock the tests set (`EVALS_ENGINE_LOCK`, tests/conftest.py) is held. Engines run one
at a time under that lock, so while it is held without a break the engines set the pace, and
the time before its first hold (imports, fixtures) and its free stretches are the rest. It
prints the wall time, the seconds held, the first hold and every free stretch of more than
two seconds, and how busy the machine's cores were (/proc/stat, every process counted),
and writes them to OUT.json with the CPU model. Held without a break while the cores are
not busy means the engine chain sets the pace; busy cores mean CPU time does. Linux only.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "evals-tests-engine.lock"  # tests/conftest.py
STEP = 0.25
SCHEMA = "suite_profile/1"


def locked_inodes(proc_locks: str) -> set[int]:
    """The inodes that /proc/locks lists as locked. A line is `1: FLOCK ADVISORY WRITE PID
    MAJ:MIN:INODE START END`; a blocked waiter's line has `->` after its number."""
    inodes = set()
    for line in proc_locks.splitlines():
        fields = line.replace("->", "").split()
        if len(fields) >= 6 and fields[5].count(":") == 2:
            inodes.add(int(fields[5].rsplit(":", 1)[1]))
    return inodes


def is_held(lock: Path) -> bool:
    try:
        inode = lock.stat().st_ino
    except FileNotFoundError:
        return False
    return inode in locked_inodes(Path("/proc/locks").read_text())


def summarize(samples: list[tuple[float, bool]], min_gap: float = 2.0) -> dict:
    """Seconds held, the first hold and the free stretches of at least min_gap seconds, from
    (seconds since the start, held) samples in time order."""
    held = 0.0
    first = None
    gaps = []
    free_since = None  # the start of a free stretch after the first hold
    previous = 0.0
    for t, locked in samples:
        if locked:
            held += t - previous
            if first is None:
                first = t
            if free_since is not None and t - free_since >= min_gap:
                gaps.append({"at": round(free_since, 1), "seconds": round(t - free_since, 1)})
            free_since = None
        elif free_since is None and first is not None:
            free_since = t
        previous = t
    end = samples[-1][0] if samples else 0.0
    if free_since is not None and end - free_since >= min_gap:
        gaps.append({"at": round(free_since, 1), "seconds": round(end - free_since, 1)})
    return {"wall_seconds": round(end, 1), "held_seconds": round(held, 1),
            "first_hold_at": None if first is None else round(first, 1), "free_gaps": gaps}


def cpu_times(proc_stat: str) -> tuple[int, int]:
    """(busy, all) jiffies of the machine's cores from /proc/stat's first line: idle and
    iowait are not busy; guest time is already inside user and nice."""
    fields = [int(x) for x in proc_stat.splitlines()[0].split()[1:]]
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal
    return total - fields[3] - fields[4], total


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out, command = Path(argv[0]), argv[2:]
    lock = Path(os.environ.get("EVALS_ENGINE_LOCK") or LOCK)
    started = time.monotonic()
    busy_before, all_before = cpu_times(Path("/proc/stat").read_text())
    proc = subprocess.Popen(command)
    samples = []
    while proc.poll() is None:
        samples.append((time.monotonic() - started, is_held(lock)))
        time.sleep(STEP)
    samples.append((time.monotonic() - started, False))
    busy_after, all_after = cpu_times(Path("/proc/stat").read_text())
    result = {"schema": SCHEMA, "command": command, "exit_code": proc.returncode,
              "cpu": _cpu_model(), "cores": os.cpu_count(), "lock": str(lock),
              # the whole machine's, every process counted (daemons and servers too)
              "cores_busy_share": round((busy_after - busy_before)
                                        / max(all_after - all_before, 1), 3),
              **summarize(samples)}
    out.write_text(json.dumps(result, indent=1) + "\n")
    line = f"wall {result['wall_seconds']:.0f} s, cores busy {result['cores_busy_share']:.0%}; "
    if result["first_hold_at"] is None:
        line += f"the engine lock {lock} was never held"
    else:
        share = result["held_seconds"] / max(result["wall_seconds"], 1e-9)
        gaps = ", ".join(f"{g['seconds']} s at {g['at']} s" for g in result["free_gaps"])
        line += (f"engine lock held {result['held_seconds']:.0f} s ({share:.0%}); first held at "
                 f"{result['first_hold_at']} s; free stretches over 2 s: {gaps or 'none'}")
    print(line)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
