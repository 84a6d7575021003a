"""What a fork server's import of vLLM's engine-start modules saves each forked arm
(evals.runner.vllm_compat.import_engine_modules, an entry of FORK_MODULES).

    python benchmarks/bench_fork_preload.py [--limit 40] [--repeats 3]

Runs the same A/A of the shipped model (two tasks, the engine tests' settings: enforce_eager,
engine core in the worker) with `--fresh`, its arms forked from fork servers, alternately
from a server without that entry (the reference: FORK_MODULES as before it) and from one
with it, `repeats` times each, after one untimed run of each that starts both servers.
Reports each arm's engine start (its manifest's `timeline`: engine_turn -> go, the part
of the engine turn before the first request) and the whole `ab` command's wall time,
medians of the same session, with-entry against without.
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
from evals.runner.worker_imports import FORK_MODULES  # noqa: E402

ENTRY = "evals.runner.vllm_compat:import_engine_modules"
WITHOUT = tuple(m for m in FORK_MODULES if m != ENTRY)
# `ab` with the launcher's FORK_MODULES replaced (the server key includes the modules, so
# each variant gets a server of its own)
AB = ("import sys, evals.runner.launch as launch; launch.FORK_MODULES = tuple(sys.argv[1:2] "
      "and sys.argv[1].split(',')); from evals.cli import main; raise SystemExit(main(sys.argv[2:]))")


def one_run(folder: Path, limit: int, servers: Path, modules: tuple[str, ...]) -> dict:
    path = write_aa_config(folder, limit, "bench-preload")
    reports = folder / "reports"
    env = {**os.environ, FORK_SERVER_ENV: str(servers)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", AB, ",".join(modules), "ab", str(path),
                           "--reports", str(reports), "--store", str(folder / "store"),
                           "--fresh"], cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    summary = aa_summary(done, reports)
    arms = [summary["arms"][arm] for arm in ("baseline", "candidate")]
    if not all(a["forked"] for a in arms):
        raise SystemExit(f"expected forked arms: {done.stdout[-2000:]}")
    starts = [a["timeline"]["go"] - a["timeline"]["engine_turn"] for a in arms]
    return {"wall": wall, "engine_start": statistics.mean(starts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if ENTRY not in FORK_MODULES:
        raise SystemExit(f"{ENTRY} is not in FORK_MODULES: nothing to compare")
    variants = {"without": WITHOUT, "with": FORK_MODULES}
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="forks") as servers_dir:
        servers = Path(servers_dir)
        try:
            for modules in variants.values():  # start both servers (untimed)
                with tempfile.TemporaryDirectory() as scratch:
                    one_run(Path(scratch), args.limit, servers, modules)
            for i in range(args.repeats):
                for name, modules in variants.items():
                    with tempfile.TemporaryDirectory() as scratch:
                        r = one_run(Path(scratch), args.limit, servers, modules)
                    runs[name].append(r)
                    print(f"run {i + 1} {name:7}: ab {r['wall']:.1f} s, an arm's engine start "
                          f"{r['engine_start']:.2f} s")
        finally:
            stop_servers(servers)
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("wall", "engine_start")}
           for name, rs in runs.items()}
    w, wo = med["with"], med["without"]
    print(f"median: an arm's engine start {w['engine_start']:.2f} s with the entry against "
          f"{wo['engine_start']:.2f} s without ({w['engine_start'] / wo['engine_start']:.2f}x); "
          f"`ab` {w['wall']:.1f} s against {wo['wall']:.1f} s "
          f"({w['wall'] / wo['wall']:.2f}x)")


if __name__ == "__main__":
    main()
