"""Where the repository's folders are, the two arms' names and a study's file names: the
suite's few constants that every stage shares (one definition each). The vLLM releases
are evals.runner.vllm_compat's."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO_ROOT / "tasks"  # the bundled lm-eval tasks
REPORTS_DIR = REPO_ROOT / "reports"  # run directories; the run store under store/
ARMS = ("baseline", "candidate")
# A study's own files in its run folder (evals.pipelines.study writes them, CI outputs read them)
STUDY_FILE, STUDY_PAGE, STUDY_MARKDOWN = "study.json", "study.html", "study.md"
