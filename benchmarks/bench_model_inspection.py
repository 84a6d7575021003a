"""What forking vLLM's model-class inspections saves (evals.runner.model_inspection): a
model class vLLM has not met is inspected in a fresh interpreter that imports vLLM again;
in a process forked by a fork server, a sibling fork does it instead.

    python benchmarks/bench_model_inspection.py [--repeats 3]

Starts a fork server (the offline workers' imports, evals.runner.worker_imports) and forks
one child from it. The child inspects the shipped model's class alternately with vLLM's
own `_run_in_subprocess` (the reference: `python -m vllm.model_executor.models.registry`)
and with the forked route, `repeats` times each, with vLLM's on-disk cache out of the way
(the function is called directly), and checks that both give the same answer. Reports the
medians of wall time and of the machine's CPU time (/proc/stat: run it on a quiet machine),
forked against fresh, from the same session.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evals.runner import fork_server  # noqa: E402
from evals.runner.worker_imports import FORK_MODULES  # noqa: E402

MODEL = ROOT / "models" / "tiny-reviews"
CHILD = "--child"


def _cpu_seconds() -> float:
    """The machine's busy CPU time so far (all cores; /proc/stat's jiffies)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def child(architecture: str, repeats: int) -> None:
    """In the forked child: both routes, alternately; one JSON line per call."""
    from vllm.model_executor.models import registry

    from evals.runner.model_inspection import inspect_in_forks

    fresh = registry._run_in_subprocess
    if not inspect_in_forks():
        raise SystemExit("the forked route is not available here")
    forked = registry._run_in_subprocess
    model = registry.ModelRegistry.models[architecture]
    answers = {}
    for _ in range(repeats):
        for kind, run in (("fresh", fresh), ("forked", forked)):
            cpu, started = _cpu_seconds(), time.perf_counter()
            answers[kind] = run(lambda: registry._ModelInfo.from_model_cls(model.load_model_cls()))
            print(json.dumps({"kind": kind, "wall": time.perf_counter() - started,
                              "cpu": _cpu_seconds() - cpu}), flush=True)
    if answers["fresh"] != answers["forked"]:
        raise SystemExit(f"the routes disagree: {answers['fresh']} != {answers['forked']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    architecture = json.loads((MODEL / "config.json").read_text())["architectures"][0]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_LOGGING_LEVEL": "WARNING"}
    with tempfile.TemporaryDirectory(prefix="forks") as folder:
        try:
            started = time.perf_counter()
            run = fork_server.fork(folder, ["-m", "benchmarks.bench_model_inspection", CHILD,
                                            architecture, str(args.repeats)],
                                   env, str(ROOT), modules=FORK_MODULES)
            output, _ = run.communicate()
            total = time.perf_counter() - started
        finally:
            fork_server.stop_servers(folder)
    if run.returncode != 0:
        raise SystemExit(f"the child failed (exit {run.returncode}):\n{output[-3000:]}")
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    for row in rows:
        print(f"{row['kind']:6}: {row['wall']:5.2f} s wall, {row['cpu']:5.2f} CPU-s")
    med = {kind: {k: statistics.median(r[k] for r in rows if r["kind"] == kind)
                  for k in ("wall", "cpu")} for kind in ("fresh", "forked")}
    print(f"{architecture}, {args.repeats} of each, {total:.0f} s in all (server start "
          f"included); the same answer both ways")
    print(f"median: a forked inspection takes {med['forked']['wall'] / med['fresh']['wall']:.3f}x "
          f"the wall time of vLLM's fresh interpreter ({med['forked']['wall']:.2f} s against "
          f"{med['fresh']['wall']:.2f} s) and {med['forked']['cpu'] / med['fresh']['cpu']:.3f}x "
          f"its CPU time ({med['forked']['cpu']:.2f} against {med['fresh']['cpu']:.2f} CPU-s)")


if __name__ == "__main__":
    if sys.argv[1:2] == [CHILD]:
        child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
