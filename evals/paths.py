"""Where the repository's folders are, and the two arms' names: the suite's few constants
that every stage shares (one definition each)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO_ROOT / "tasks"  # the bundled lm-eval tasks
REPORTS_DIR = REPO_ROOT / "reports"  # run directories; the run store under store/
ARMS = ("baseline", "candidate")
