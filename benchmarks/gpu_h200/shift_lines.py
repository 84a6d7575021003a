"""One line per task of a run's distribution-shift test (the GPU shift step of run.sh):
    python benchmarks/gpu_h200/shift_lines.py RUN_DIR [RUN_DIR ...]
run, task, items (informative), mean KL excess over the A/A rerun with its interval, the
margin delta, Holm-adjusted p, and whether the task is flagged at the run's alpha."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def lines(run_dir: Path) -> list[str]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    alpha = summary["gate"]["alpha"]
    out = []
    for task in (summary.get("shift") or {}).get("tasks", []):
        test = task.get("test") or {}
        if not test:
            out.append(f"{run_dir.name} {task['task']}: no test ({task.get('test_note')})")
            continue
        low, high = test["confidence_interval"]
        p = task.get("pvalue_adjusted")
        out.append(f"{run_dir.name} {task['task']}: n={test['n']} ({test['n_informative']} "
                   f"differ) excess={test['mean_difference']:.3g} [{low:.3g}, {high:.3g}] "
                   f"delta={test.get('margin')} holm_p={p:.3g} "
                   f"{'SHIFTED' if p is not None and p <= alpha else 'no shift'}")
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print("\n".join(lines(Path(arg))))
