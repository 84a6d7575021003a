"""What the launcher's turn-taking saves (evals.runner.launch.run_arms_in_turn): the next
arm's worker imports vLLM and lm-eval while the arm before it starts and runs, and the
arms' workers resolve the config audit's configs, so no resolver process imports vLLM.

    python benchmarks/bench_arm_overlap.py [--limit 40] [--repeats 2]

Runs an A/A of the shipped model (two tasks, the engine tests' settings: enforce_eager,
engine core in the worker) with `--fresh` in a scratch folder, `repeats` times. From each
arm's manifest `timeline` it takes the arm's own work - importing, then building its engine
and running its tasks, its waits left out - and compares the run's wall time (first worker
started to last worker finished) with the sum of the arms' own work: what the same arms
take one after another, each importing in turn. Both come from the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ENGINE = {"dtype": "bfloat16", "max_model_len": 1024, "enforce_eager": True,
          "enable_prefix_caching": False}
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def write_aa_config(folder: Path, limit: int, name: str) -> Path:
    """An A/A config of the shipped model: two tasks, the engine tests' settings."""
    config = {
        "name": name, "model": str(ROOT / "models" / "tiny-reviews"),
        "tasks": [{"name": "tiny_reviews_gen", "metric": "exact_match"},
                  {"name": "tiny_addition", "metric": "exact_match"}],
        "limit": limit, "seed": 1234, "expect_identical_arms": True, "intended_change": [],
        "arms": {arm: {"engine": ENGINE, "env": ENV} for arm in ("baseline", "candidate")}}
    path = folder / "aa.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def aa_summary(done: subprocess.CompletedProcess, reports: Path) -> dict:
    """The finished A/A's summary.json (its one run under `reports`); exits on a failed A/A."""
    if done.returncode not in (0, 3):
        raise SystemExit(f"the A/A failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    (run_dir,) = [p.parent for p in reports.glob("*/summary.json")]
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))


def one_run(folder: Path, limit: int) -> dict:
    path = write_aa_config(folder, limit, "bench-overlap")
    reports = folder / "reports"
    done = subprocess.run([sys.executable, "-m", "evals", "ab", str(path), "--reports",
                           str(reports), "--store", str(folder / "store"), "--fresh"],
                          cwd=ROOT, capture_output=True, text=True)
    summary = aa_summary(done, reports)
    timelines = {arm: summary["arms"][arm]["timeline"] for arm in ("baseline", "candidate")}
    own = {arm: (t["imported"] - t["started"]) + (t["finished"] - t["engine_turn"])
           for arm, t in timelines.items()}
    wall = (max(t["finished"] for t in timelines.values())
            - min(t["started"] for t in timelines.values()))
    return {"wall": wall, "one_after_another": sum(own.values()),
            "resolved_in": summary["preflight"]["audit"]["resolved_in"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    runs = []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as scratch:
            runs.append(one_run(Path(scratch), args.limit))
        r = runs[-1]
        print(f"run {i + 1}: arms' wall {r['wall']:.1f} s, the arms' own work summed "
              f"{r['one_after_another']:.1f} s ({r['wall'] / r['one_after_another']:.2f}x); "
              f"audit resolved in {sorted(set(r['resolved_in'].values()))}")
    ratio = statistics.median(r["wall"] / r["one_after_another"] for r in runs)
    print(f"median: the two arms take {ratio:.2f}x the time of the same arms one after "
          "another (no resolver process in either)")


if __name__ == "__main__":
    main()
