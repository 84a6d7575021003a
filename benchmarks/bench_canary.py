"""Canary cost: wall time of `python -m evals canary CONFIG` against one `python -m evals ab
CONFIG` run of the same config, both from an empty run store, measured in this run on this
machine. The canary runs the same A/B plus one candidate arm per fault (the baseline is
reused from the store), so its extra time is about one candidate arm per fault.

Usage: python benchmarks/bench_canary.py [CONFIG] [--faults NAME ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(args: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "evals", *args], cwd=ROOT,
                            capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1, 3):
        sys.exit(f"`python -m evals {' '.join(args)}` failed ({result.returncode}):\n"
                 f"{result.stderr[-3000:]}")
    return elapsed, result.returncode


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="configs/cpu/mtp_prefix.yaml")
    parser.add_argument("--faults", nargs="+")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-canary-") as tmp:
        root = Path(tmp)
        ab_seconds, ab_code = timed(["ab", args.config, "--reports", str(root / "ab"),
                                     "--store", str(root / "ab-store")])
        extra = ["--faults", *args.faults] if args.faults else []
        canary_seconds, canary_code = timed(["canary", args.config, "--reports",
                                             str(root / "canary"), "--store",
                                             str(root / "canary-store"), *extra])
        (canary_json,) = (root / "canary").glob("canary-*/canary.json")
        faults = len(json.loads(canary_json.read_text())["faults"])
    print(f"config {args.config}: ab {ab_seconds:.0f} s (exit {ab_code}); canary with {faults} "
          f"fault(s) {canary_seconds:.0f} s (exit {canary_code})")
    print(f"canary extra wall time over one ab run: {canary_seconds - ab_seconds:.0f} s, "
          f"ratio canary / ab {canary_seconds / ab_seconds:.2f} "
          f"({(canary_seconds - ab_seconds) / faults:.0f} s per fault)")
