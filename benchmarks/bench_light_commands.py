"""Speed of the light commands beside NeMo Evaluator's: `python -m evals compare` against
`nel compare` and `python -m evals release` against `nel gate`, on the same items, whole
process (wall time and peak RSS of the command and its children), 5 runs each, in turn.

    python3.12 -m venv /tmp/nel && /tmp/nel/bin/pip install "nemo-evaluator[stats]==0.3.0"
    .nox/tests/bin/python benchmarks/bench_light_commands.py --nel /tmp/nel/bin/nel \
        [--outputs BASELINE_DIR CANDIDATE_DIR] [--runs 5] [--work DIR] [--out DIR]

The inputs are real lm-eval `--log_samples` outputs: by default lm-eval's CLI with vLLM runs
the embedded model (baseline) and its noised copy (models/tiny-reviews-noised, candidate) on
3 tasks x 600 items (tiny_reviews_gen, tiny_reviews_mc, tiny_addition; `--limit 600`), once,
into --work (kept; a second call reuses them), holding the machine's engine lock
(EVALS_ENGINE_LOCK, default /tmp/evals-tests-engine.lock). `--outputs` takes any two such
directories instead. nel reads the same per-item scores as bundles (eval-<task>.json and
results.jsonl, one `reward` per item: tests/fixtures/nel_gate/make_reference.py writes them),
one bundle per task.

The pairs measured, each command in a fresh process, the four in turn per round (the order
rotated each round, after one warm-up round that is not counted):
* `python -m evals compare BASE CAND --margin 0.03` (its run folder and store in a new
  temporary folder each time) and `nel compare NEL_BASE NEL_CAND --max-drop 0.03
  --no-strict` (its JSON and Markdown report into a new temporary folder);
* `python -m evals release POLICY RUN_DIR` (RUN_DIR: the compare run of these outputs,
  made once; every task critical at margin 0.03) and `nel gate` with the same tiers and
  max_drop 0.03 (`--no-strict`, its JSON and Markdown reports likewise).
Peak RSS is `ru_maxrss` of the process tree from os.wait4. Results: --out/light_commands.json
and light_commands.md (default benchmarks/results/cpu-<isa>/ of this machine).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("tiny_reviews_gen", "tiny_reviews_mc", "tiny_addition")
MARGIN = 0.03
PAIRS = (("compare", "nel compare"), ("release", "nel gate"))
LOCK = "/tmp/evals-tests-engine.lock"


def _nel_bundles_module():
    """tests/fixtures/nel_gate/make_reference.py: how the nel reference bundles are written."""
    path = ROOT / "tests" / "fixtures" / "nel_gate" / "make_reference.py"
    spec = importlib.util.spec_from_file_location("nel_make_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_outputs(work: Path, limit: int) -> tuple[Path, Path]:
    """lm-eval's CLI on vLLM: the embedded model and its noised copy, `limit` items of each
    task, logged samples, under the engine lock (made once; kept in `work`)."""
    dirs = []
    for arm, model in (("baseline", "models/tiny-reviews"),
                       ("candidate", "models/tiny-reviews-noised")):
        out = work / "lm_eval" / arm
        dirs.append(out)
        if list(out.rglob("samples_*.jsonl")):
            continue
        env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
               "VLLM_LOGGING_LEVEL": "WARNING", "VLLM_CPU_KVCACHE_SPACE": "2",
               "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
        model_args = json.dumps({"pretrained": model, "dtype": "bfloat16",
                                 "max_model_len": 1024, "seed": 1234})
        print(f"lm-eval: {model}, {limit} items x {len(TASKS)} tasks", flush=True)
        subprocess.run(["flock", os.environ.get("EVALS_ENGINE_LOCK", LOCK), sys.executable,
                        "-m", "lm_eval", "run", "--model", "vllm", "--model_args", model_args,
                        "--tasks", ",".join(TASKS), "--include_path", "tasks",
                        "--limit", str(limit), "--batch_size", "auto", "--log_samples",
                        "--output_path", str(out), "--seed", "1234"],
                       cwd=ROOT, env=env, check=True, capture_output=True)
    return dirs[0], dirs[1]


def item_scores(output_dir: Path) -> dict[str, list[float]]:
    """Per task, each item's score (its one metric) in doc_id order, from the newest
    samples file of each task."""
    scores = {}
    for task in TASKS:
        files = sorted(output_dir.rglob(f"samples_{task}_*.jsonl"), key=lambda p: p.name)
        if not files:
            sys.exit(f"{output_dir} has no samples file of {task}")
        rows = [json.loads(line) for line in files[-1].read_text().splitlines() if line]
        rows.sort(key=lambda r: int(r["doc_id"]))
        scores[task] = [float(r[r["metrics"][0]]) for r in rows]
    return scores


def write_nel_inputs(work: Path, base: Path, cand: Path) -> tuple[Path, Path, Path]:
    """nel's bundles of the same items (one per task) and its gate policy."""
    bundles = _nel_bundles_module()
    roots = []
    for arm, source in (("baseline", base), ("candidate", cand)):
        root = work / "nel" / arm
        shutil.rmtree(root, ignore_errors=True)
        for task, scores in item_scores(source).items():
            bundles._bundle(root, task, scores)
        roots.append(root)
    policy = work / "nel" / "policy.yaml"
    policy.write_text(json.dumps({  # JSON is YAML
        "version": 1, "defaults": {"tier": "critical", "max_drop": MARGIN,
                                   "metric": "mean_reward"},
        "benchmarks": {task: {} for task in TASKS}}))
    return roots[0], roots[1], policy


def write_release_inputs(work: Path, base: Path, cand: Path) -> tuple[Path, Path]:
    """The suite's policy (the same tiers and margin) and the compare run it judges."""
    policy = work / "release_policy.yaml"
    policy.write_text(json.dumps({
        "name": "light-commands", "alpha": 0.05, "blocking": ["critical"],
        "defaults": {"margin": MARGIN}, "tiers": {"critical": list(TASKS)}}))
    reports = work / "release_input"
    shutil.rmtree(reports, ignore_errors=True)
    result = subprocess.run([sys.executable, "-m", "evals", "compare", str(base), str(cand),
                             "--margin", str(MARGIN), "--reports", str(reports),
                             "--store", str(reports / "store")],
                            cwd=ROOT, capture_output=True, text=True)
    if result.returncode not in (0, 1, 3):
        sys.exit(f"compare failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return policy, next(p for p in reports.iterdir() if p.name.startswith("compare-"))


def commands(nel: str, base, cand, nel_base, nel_cand, nel_policy, policy, run_dir):
    """name -> a function of a fresh output folder giving the command line."""
    py = sys.executable
    return {
        "compare": lambda out: [py, "-m", "evals", "compare", str(base), str(cand), "--margin",
                                str(MARGIN), "--reports", str(out), "--store",
                                str(out / "store")],
        "nel compare": lambda out: [nel, "compare", str(nel_base), str(nel_cand), "--max-drop",
                                    str(MARGIN), "--no-strict", "-o", str(out / "compare.json"),
                                    "--report", str(out / "compare.md")],
        "release": lambda out: [py, "-m", "evals", "release", str(policy), str(run_dir),
                                "--out", str(out / "release")],
        "nel gate": lambda out: [nel, "gate", str(nel_base), str(nel_cand), "--policy",
                                 str(nel_policy), "--no-strict", "-o", str(out / "gate.json"),
                                 "--report", str(out / "gate.md")],
    }


def timed(cmd: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds (user + system), peak RSS (MiB) of the process and its
    waited-for children, exit code."""
    # as on a user's machine: modules' bytecode cached (the warm-up round writes it)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    err = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if process.returncode not in (0, 1, 3):
        sys.exit(f"failed ({process.returncode}): {' '.join(cmd)}\n{err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, \
        process.returncode


def cpu_name() -> str:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                 if line.startswith("model name")), platform.processor() or "unknown")
    isa = "AVX-512" if " avx512f" in info else "AVX2" if " avx2" in info else "no AVX2"
    return f"{name} with {isa}, {os.cpu_count()} CPUs"


def nel_version(nel: str) -> str:
    out = subprocess.run([nel, "--version"], capture_output=True, text=True).stdout.strip()
    return out or "unknown"


def measure(cmds: dict, runs: int, scratch: Path) -> dict[str, list[dict]]:
    names = list(cmds)
    samples: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(runs + 1):  # round 0 warms the file cache for every command
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in order:
            out = Path(tempfile.mkdtemp(prefix="run-", dir=scratch))
            wall, cpu, rss, code = timed(cmds[name](out))
            shutil.rmtree(out, ignore_errors=True)
            if round_:
                samples[name].append({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                                      "peak_rss_mib": round(rss, 1),
                                      "exit": code, "load1": round(os.getloadavg()[0], 2)})
            print(f"round {round_}{' (warm-up)' if not round_ else ''}: {name:12s} "
                  f"{wall:6.2f} s (CPU {cpu:5.2f} s) {rss:6.0f} MiB exit {code}", flush=True)
    return samples


def summarise(samples: dict[str, list[dict]]) -> dict:
    medians = {name: {"wall_s": statistics.median(s["wall_s"] for s in rows),
                      "cpu_s": statistics.median(s["cpu_s"] for s in rows),
                      "peak_rss_mib": statistics.median(s["peak_rss_mib"] for s in rows),
                      "wall_min_s": min(s["wall_s"] for s in rows),
                      "wall_max_s": max(s["wall_s"] for s in rows)}
               for name, rows in samples.items()}
    ratios = {f"{ours} / {peer}": {
        "wall": round(medians[ours]["wall_s"] / medians[peer]["wall_s"], 3),
        "cpu": round(medians[ours]["cpu_s"] / medians[peer]["cpu_s"], 3),
        "peak_rss": round(medians[ours]["peak_rss_mib"] / medians[peer]["peak_rss_mib"], 3)}
        for ours, peer in PAIRS}
    return {"medians": medians, "ratios": ratios}


def markdown(result: dict) -> str:
    lines = [
        "# Light commands beside NeMo Evaluator's (benchmarks/bench_light_commands.py)", "",
        f"Machine: {result['cpu']}; {result['machine_note']}",
        f"Suite: Python {result['python']}, commit {result['commit']}; peer: "
        f"{result['nel_version']} (Python {result['nel_python']}).",
        f"Inputs: {result['inputs']}", "",
        f"Whole process, {result['runs']} runs each, the four commands in turn (order rotated "
        "per round, one warm-up round not counted); peak RSS of the process tree.", "",
        "| command | median wall (s) | min-max (s) | median CPU (s) | median peak RSS (MiB) |",
        "|---|---|---|---|---|"]
    for name, m in result["medians"].items():
        lines.append(f"| `{name}` | {m['wall_s']:.2f} | {m['wall_min_s']:.2f}-"
                     f"{m['wall_max_s']:.2f} | {m['cpu_s']:.2f} | {m['peak_rss_mib']:.0f} |")
    lines += ["", "| ratio (ours / peer) | wall | CPU | peak RSS |", "|---|---|---|---|"]
    for name, r in result["ratios"].items():
        lines.append(f"| {name} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['peak_rss']:.2f} |")
    lines += ["", "Every run (wall, CPU, peak RSS; the 1-minute load average after it):", ""]
    for name, rows in result["samples"].items():
        shown = ", ".join(f"{s['wall_s']:.2f} s/{s['cpu_s']:.2f} s/{s['peak_rss_mib']:.0f} MiB"
                          f" (load {s['load1']:.1f})" for s in rows)
        lines.append(f"- `{name}`: {shown}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nel", default=shutil.which("nel") or "nel",
                        help="the `nel` executable (nemo-evaluator[stats]==0.3.0, Python 3.12)")
    parser.add_argument("--outputs", nargs=2, metavar=("BASELINE_DIR", "CANDIDATE_DIR"),
                        help="lm-eval --log_samples directories of the same tasks")
    parser.add_argument("--limit", type=int, default=600)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "bench-light"))
    parser.add_argument("--out", help="results folder (default benchmarks/results/cpu-<isa>)")
    parser.add_argument("--note", default="", help="a line about the machine's load")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    base, cand = (map(Path, args.outputs) if args.outputs
                  else make_outputs(work, args.limit))
    nel_base, nel_cand, nel_policy = write_nel_inputs(work, base, cand)
    policy, run_dir = write_release_inputs(work, base, cand)
    cmds = commands(args.nel, base, cand, nel_base, nel_cand, nel_policy, policy, run_dir)
    scratch = work / "scratch"
    scratch.mkdir(exist_ok=True)
    samples = measure(cmds, args.runs, scratch)
    scores = item_scores(base)
    nel_python = subprocess.run([str(Path(args.nel).with_name("python")), "-c",
                                 "import platform; print(platform.python_version())"],
                                capture_output=True, text=True).stdout.strip() or "unknown"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    result = {"cpu": cpu_name(), "machine_note": args.note or "see the load averages",
              "python": platform.python_version(), "commit": commit,
              "nel_version": nel_version(args.nel), "nel_python": nel_python,
              "inputs": f"{len(scores)} tasks x {', '.join(str(len(s)) for s in scores.values())}"
                        f" items ({', '.join(scores)}), lm-eval --log_samples outputs of "
                        f"{base} and {cand}; margin/max_drop {MARGIN}",
              "runs": args.runs, **summarise(samples), "samples": samples}
    isa = "avx512" if "AVX-512" in result["cpu"] else "avx2"
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"cpu-{isa}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "light_commands.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "light_commands.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
