"""What a fork server saves (evals.runner.fork_server, `EVALS_FORK_SERVER`): each offline
arm's worker is forked from a process that has already imported vLLM and lm-eval, instead
of starting a fresh interpreter that imports them again.

    python benchmarks/bench_fork_server.py [--limit 40] [--repeats 2]

Runs the same A/A of the shipped model (two tasks, the engine tests' settings:
enforce_eager, engine core in the worker) with `--fresh`, alternately with fresh
interpreters (the reference) and forked from a warm fork server (started by one untimed
run first), `repeats` times each. Reports the whole `ab` command's wall time and the arms'
import time (their manifests' `timeline`: started -> imported), forked against fresh,
medians of the same session.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_arm_overlap import aa_summary, write_aa_config  # noqa: E402 - this folder's A/A

from evals.runner.fork_server import FORK_SERVER_ENV, stop_servers  # noqa: E402


def one_run(folder: Path, limit: int, servers: Path | None) -> dict:
    path = write_aa_config(folder, limit, "bench-fork")
    reports = folder / "reports"
    env = {k: v for k, v in os.environ.items() if k != FORK_SERVER_ENV}
    if servers is not None:
        env[FORK_SERVER_ENV] = str(servers)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "evals", "ab", str(path), "--reports",
                           str(reports), "--store", str(folder / "store"), "--fresh"],
                          cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    summary = aa_summary(done, reports)
    arms = [summary["arms"][arm] for arm in ("baseline", "candidate")]
    if any(a["forked"] != (servers is not None) for a in arms):
        raise SystemExit(f"expected forked={servers is not None}: {done.stdout[-2000:]}")
    imports = sum(a["timeline"]["imported"] - a["timeline"]["started"] for a in arms)
    return {"wall": wall, "imports": imports}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="forks") as servers_dir:
        servers = Path(servers_dir)
        try:
            with tempfile.TemporaryDirectory() as scratch:
                warm = one_run(Path(scratch), args.limit, servers)
            print(f"warm-up (starts the server, imports once): {warm['wall']:.1f} s")
            fresh, forked = [], []
            for i in range(args.repeats):
                for kind, runs in (("fresh", fresh), ("forked", forked)):
                    with tempfile.TemporaryDirectory() as scratch:
                        runs.append(one_run(Path(scratch), args.limit,
                                            servers if kind == "forked" else None))
                    r = runs[-1]
                    print(f"run {i + 1} {kind:6}: ab {r['wall']:.1f} s, the arms' imports "
                          f"{r['imports']:.1f} s")
        finally:
            stop_servers(servers)
    med = {name: {k: statistics.median(r[k] for r in runs) for k in ("wall", "imports")}
           for name, runs in (("fresh", fresh), ("forked", forked))}
    print(f"median: forked `ab` takes {med['forked']['wall'] / med['fresh']['wall']:.2f}x "
          f"the wall time of fresh interpreters ({med['forked']['wall']:.1f} s against "
          f"{med['fresh']['wall']:.1f} s); the arms' imports "
          f"{med['forked']['imports']:.1f} s against {med['fresh']['imports']:.1f} s")


if __name__ == "__main__":
    main()
