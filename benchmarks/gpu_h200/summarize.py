"""Turns what benchmarks/gpu_h200/run.sh brought back into committed evidence and the
docs/where_it_runs.md's "Measured on one H200" table.

    python benchmarks/gpu_h200/summarize.py UNPACKED_DIR [--out benchmarks/results/gpu-h200]

UNPACKED_DIR holds `logs/` and `reports/` (a step's .tgz unpacked). Per run it keeps
summary.json, summary.md, junit.xml, report.html and the workers' `[evals]` lines; of the
machine: versions, nvidia-smi, the check-engine-args and doctor output, each `ab` log's
lines without the protocol's JSON. Prints the table (markdown) to stdout.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from evals.report._speed import speed_change

ROOT = Path(__file__).resolve().parents[2]
KEEP = ("summary.json", "summary.md", "junit.xml", "report.html")
CHANGES = {"mtp-prefix": "MTP + prefix caching vs neither", "kv-fp8": "FP8 KV cache vs bf16",
           "fp8-weights": "online FP8 weights vs bf16", "w4a16": "W4A16 checkpoint (Marlin)",
           "w8a8": "W8A8 checkpoint (CUTLASS)",
           "chunked-prefill": "chunked prefill (64-token chunks) vs whole prompts",
           "cuda-graphs": "CUDA graphs + torch.compile vs eager",
           "aa-batch-invariant": "A/A, VLLM_BATCH_INVARIANT=1"}


def _lines(path: Path) -> list[str]:
    """A log without the ask protocol's JSON lines and progress bars."""
    keep = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("[evals-ask]") or "it/s]" in line or "%|" in line:
            continue
        keep.append(line[:400])
    return keep


def _change(run_id: str) -> str:
    stem = run_id.removeprefix("gpu-").rsplit("-", 1)[0]
    return CHANGES.get(stem, stem)


def _row(summary: dict) -> str:
    tasks = summary["tasks"]
    worst = min(tasks, key=lambda t: t["delta"])
    flips = sum(t["correct_to_wrong"] for t in tasks), sum(t["wrong_to_correct"] for t in tasks)
    arms = summary["arms"]
    starts = "/".join(f"{arms[a].get('engine_start_seconds', 0):.0f}" for a in ("baseline",
                                                                              "candidate"))
    walls = "/".join(f"{arms[a].get('wall_seconds_last_run', 0):.0f}" for a in ("baseline",
                                                                             "candidate"))
    rows = {(r["arm"], r["task"]): r for r in (summary.get("exercise") or {}).get("tasks", [])}
    shared = rows.get(("candidate", "tiny_reviews_shared_prefix"), {})
    drafted = sum(r.get("drafted_tokens") or 0 for k, r in rows.items() if k[0] == "candidate")
    accepted = sum(r.get("accepted_tokens") or 0 for k, r in rows.items() if k[0] == "candidate")
    exercise = f"cache {100 * (shared.get('cached_share') or 0):.0f}%"
    if drafted:
        exercise += f", drafts {accepted:.0f}/{drafted:.0f} accepted"
    audit = (summary.get("preflight") or {}).get("audit") or {}
    resolved = "resolved" if audit.get("resolved") else "requested only"
    speed = speed_change(summary)
    return (f"| {_change(summary['run_id'])} | **{summary['verdict']}** ({summary['exit_code']}) "
            f"| {worst['task']} {100 * worst['delta']:+.2f} pts "
            f"[{100 * worst['ci_low']:+.2f}, {100 * worst['ci_high']:+.2f}] "
            f"| {flips[0]} / {flips[1]} | {exercise} | {speed.text if speed else '-'} "
            f"| {resolved} | {starts} | {walls} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("unpacked", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/gpu-h200")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    logs = args.unpacked / "logs"
    for name in ("versions.txt", "nvidia-smi.csv", "doctor.log"):
        if (logs / name).exists():
            shutil.copy(logs / name, out / name)
    for log in sorted(logs.glob("*.log")):
        if log.name != "doctor.log":
            (out / log.name).write_text("\n".join(_lines(log)) + "\n", encoding="utf-8")
    rows = []
    for summary_path in sorted((args.unpacked / "reports").glob("*/summary.json")):
        run = summary_path.parent
        target = out / run.name
        target.mkdir(exist_ok=True)
        for name in KEEP:
            if (run / name).exists():
                shutil.copy(run / name, target / name)
        for arm in ("baseline", "candidate"):
            worker = run / "arms" / arm / "worker.log"
            if worker.exists():
                lines = [line for line in _lines(worker) if line.startswith("[evals]")]
                (target / f"{arm}.worker.txt").write_text("\n".join(lines) + "\n",
                                                          encoding="utf-8")
        rows.append(_row(json.loads(summary_path.read_text(encoding="utf-8"))))
    print("| change | verdict (exit) | worst task: delta [90% interval] | flips c->w / w->c "
          "| exercise (candidate) | speed | audit | engine start s (base/cand) | arm wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
