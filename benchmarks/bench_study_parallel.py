"""Wall time of the CPU study (configs/cpu/study_mtp_prefix.yaml: 2x2, four arms) with
`--parallel 2` (two arms at once, each on its own half of the cores) against `--parallel 1`
(one after another), measured in the same run on this machine.

    python benchmarks/bench_study_parallel.py [--limit 200] [--tasks 2]

Both runs start from an empty run store and `--fresh`, so every arm really runs; the item
count per task is cut (`--limit`) to keep the benchmark to minutes. The verdicts of the two
runs must agree (the same items, the same engines; only where they ran differs). On a
machine with few cores, two engines side by side mostly share the cores: the ratio says
how much of an arm's time is not compute (engine start, tokenizer, lm-eval, I/O).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "configs" / "cpu" / "study_mtp_prefix.yaml"


def _config(directory: Path, limit: int, tasks: int) -> Path:
    base = yaml.safe_load(STUDY.read_text(encoding="utf-8"))
    base["extends"] = str(STUDY.parent / base["extends"])
    base["limit"] = limit
    base["model"] = str(ROOT / "models" / "tiny-reviews")
    shipped = yaml.safe_load((STUDY.parent / "base.yaml").read_text(encoding="utf-8"))
    base["tasks"] = shipped["tasks"][:tasks]
    path = directory / "study.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False), encoding="utf-8")
    return path


def _run(config: Path, parallel: int, directory: Path) -> tuple[float, dict]:
    reports = directory / f"reports-p{parallel}"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "evals", "ab", str(config), "--fresh",
                           "--parallel", str(parallel), "--reports", str(reports),
                           "--store", str(directory / f"store-p{parallel}")],
                          cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    found = list(reports.glob("*/study.json"))
    if not found:
        sys.exit(f"--parallel {parallel} wrote no study.json (exit {proc.returncode}):\n"
                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, json.loads(found[0].read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=200, help="items per task")
    parser.add_argument("--tasks", type=int, default=2, help="the first N tasks of the study")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-study-") as tmp:
        directory = Path(tmp)
        config = _config(directory, args.limit, args.tasks)
        sequential, one = _run(config, 1, directory)
        side_by_side, two = _run(config, 2, directory)
    same = [(c["arm"], c["verdict"]) for c in one["comparisons"]] == \
        [(c["arm"], c["verdict"]) for c in two["comparisons"]]
    print(f"CPU study, 4 arms x {args.tasks} task(s) x {args.limit} items, every arm run "
          "(--fresh, empty store)")
    print(f"{'run':<34}{'wall':>9}{'ratio':>9}")
    print(f"{'--parallel 1 (reference)':<34}{sequential:>8.0f}s{1.0:>8.2f}x")
    print(f"{'--parallel 2':<34}{side_by_side:>8.0f}s{side_by_side / sequential:>8.2f}x")
    print(f"devices with --parallel 2: {json.dumps(two.get('devices', {}).get('arms', {}))}")
    print(f"verdicts agree: {same} ({one['verdict']} / {two['verdict']})")


if __name__ == "__main__":
    main()
