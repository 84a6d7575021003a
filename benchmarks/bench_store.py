"""Benchmark: a run store of 500 runs x 10,000 paired items; listing and trend page times.

    /work/venv/bin/python benchmarks/bench_store.py [--runs 500] [--items 10000] [--tasks 10]

Every run is written by the suite's own writers (`tests/synthetic_runs.py`: summary.json
from the recorded real run, paired_items.jsonl by `evals.record.run_record.write_run`) and
recorded by `RunStore.record_run`, the real path. Then it measures, each as the median of
--repeats with a fresh store object (so the SQLite connection is opened every time):

* `list_runs` (20 newest, as `python -m evals runs` asks, with and without checking each
  run's files; and all runs), against a plain sqlite3 SELECT of the same rows;
* `python -m evals runs` end to end in a new process, against starting Python and
  importing the CLI module;
* `write_trend` of the whole store, against only reading every run's summary.json;
* the store's size, against the paired_items.jsonl files it was recorded from.
Targets: listing under 1 s, trend page under 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "tests")]

import numpy as np  # noqa: E402
from synthetic_runs import PlantedTask, write_synthetic_run  # noqa: E402

from evals.report.trend import write_trend  # noqa: E402
from evals.store import RunStore  # noqa: E402

START = datetime(2025, 1, 1, tzinfo=timezone.utc)
LIST_SQL = "SELECT * FROM runs ORDER BY created DESC, recorded DESC, run_id LIMIT ?"


def _tasks(rng: np.random.Generator, items: int, n_tasks: int, week: int) -> list[PlantedTask]:
    per_task = items // n_tasks
    discordant = per_task // 20  # ~10 % of items change, half each way
    drift = max(0, week - 60) // 10  # a slow drift late in the series, for the charts
    return [PlantedTask(f"task_{t:02d}", per_task,
                        discordant + drift + int(rng.integers(-3, 4)), discordant,
                        noise_flips=int(rng.integers(per_task // 100, per_task // 50)))
            for t in range(n_tasks)]


def build(root: Path, runs: int, items: int, n_tasks: int, deployments: int) -> dict:
    store = RunStore(root / "store")
    rng = np.random.default_rng(20261130)
    record_times, jsonl_bytes = [], 0
    started = time.perf_counter()
    for i in range(runs):
        week = i // deployments
        run_dir = write_synthetic_run(
            root / "runs" / f"run-{i:04d}", run_id=f"nightly-{i:04d}",
            created=(START + timedelta(days=week, minutes=i % deployments)).isoformat(),
            tasks=_tasks(rng, items, n_tasks, week), rng=rng,
            config_name=f"deployment-{i % deployments}")
        (run_dir / "report.html").write_text("<p>report</p>", encoding="utf-8")
        jsonl = run_dir / "paired_items.jsonl"
        jsonl_bytes += jsonl.stat().st_size
        t0 = time.perf_counter()
        store.record_run(run_dir)
        record_times.append(time.perf_counter() - t0)
        jsonl.unlink()  # the store no longer needs it; keeps the benchmark's disk use small
        if (i + 1) % 50 == 0:
            print(f"  recorded {i + 1}/{runs} runs ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr)
    return {"store": store, "record": record_times, "jsonl_bytes": jsonl_bytes,
            "build": time.perf_counter() - started}


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def plain_select(index: Path, limit: int) -> list:
    with sqlite3.connect(index) as conn:
        return conn.execute(LIST_SQL, (limit,)).fetchall()


def read_summaries(runs_dir: Path) -> list:
    return [json.loads((d / "summary.json").read_text(encoding="utf-8"))
            for d in sorted(runs_dir.iterdir())]


def subprocess_time(args: list[str], env: dict, repeats: int) -> float:
    return median_time(lambda: subprocess.run(args, cwd=REPO_ROOT, env=env, check=True,
                                              capture_output=True), repeats)


def tree_bytes(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--items", type=int, default=10_000, help="paired items per run")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--deployments", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        built = build(root, args.runs, args.items, args.tasks, args.deployments)
        store_root = built["store"].root
        index = built["store"].layout.index

        def fresh() -> RunStore:
            return RunStore(store_root)

        list20 = median_time(lambda: fresh().list_runs(limit=20), args.repeats)
        list20_verified = median_time(lambda: fresh().list_runs(limit=20, verify=True),
                                      args.repeats)
        list_all = median_time(lambda: fresh().list_runs(limit=None), args.repeats)
        select20 = median_time(lambda: plain_select(index, 20), args.repeats)
        select_all = median_time(lambda: plain_select(index, -1), args.repeats)
        env = dict(os.environ, EVALS_STORE=str(store_root))
        cli_runs = subprocess_time([sys.executable, "-m", "evals", "runs"], env, args.repeats)
        cli_import = subprocess_time([sys.executable, "-c", "import evals.cli"], env,
                                     args.repeats)
        out = root / "history.html"
        trend = median_time(lambda: write_trend(fresh(), None, out), max(1, args.repeats // 2))
        one_deployment = median_time(lambda: write_trend(fresh(), "deployment-0", out),
                                     max(1, args.repeats // 2))
        write_trend(fresh(), None, out)
        summaries = median_time(lambda: read_summaries(root / "runs"), max(1, args.repeats // 2))
        store_bytes = tree_bytes(store_root)
        parquet_bytes = tree_bytes(store_root, "items.parquet")
        manifest_bytes = tree_bytes(store_root, "manifest.json")
        rows = [
            ("runs x paired items (tasks, deployments)",
             f"{args.runs:,} x {args.items:,} ({args.tasks}, {args.deployments})"),
            ("build: write + record, total", f"{built['build']:.0f} s"),
            ("record_run per run, median", f"{statistics.median(built['record']) * 1000:.0f} ms"),
            ("list_runs(limit=20)", f"{list20 * 1000:.1f} ms"),
            ("  vs plain sqlite3 SELECT of the same rows",
             f"{select20 * 1000:.1f} ms (x{list20 / select20:.1f})"),
            ("list_runs(limit=20, verify=True)", f"{list20_verified * 1000:.1f} ms"),
            ("list_runs(limit=None), all runs", f"{list_all * 1000:.1f} ms"),
            ("  vs plain sqlite3 SELECT of all rows",
             f"{select_all * 1000:.1f} ms (x{list_all / select_all:.1f})"),
            ("`python -m evals runs`, new process", f"{cli_runs:.2f} s (target < 1 s)"),
            ("  vs `python -c 'import evals.cli'`",
             f"{cli_import:.2f} s (x{cli_runs / cli_import:.2f})"),
            ("write_trend, whole store", f"{trend:.2f} s (target < 5 s)"),
            ("  vs reading every summary.json", f"{summaries:.2f} s (x{trend / summaries:.1f})"),
            ("write_trend, one deployment", f"{one_deployment:.2f} s"),
            ("history.html bytes", f"{out.stat().st_size:,}"),
            ("store bytes (index + manifests + parquet)", f"{store_bytes:,}"),
            ("  index.sqlite", f"{index.stat().st_size:,}"),
            ("  manifests, per run", f"{manifest_bytes // args.runs:,}"),
            ("  items.parquet, per run", f"{parquet_bytes // args.runs:,}"),
            ("  vs paired_items.jsonl recorded from, per run",
             f"{built['jsonl_bytes'] // args.runs:,} "
             f"(parquet x{parquet_bytes / built['jsonl_bytes']:.3f})"),
        ]
    width = max(len(name) for name, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 24}")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
