"""Building a run's manifest from its summary and paired items (the record path).

Kept apart from reading manifests so that listing the store does not import the run
records (evals.record.run_record). Neither path imports scipy (about a second of every
`record` and of every process that records a run): the one statistic here, a standard
error, is numpy's, equal to scipy.stats.sem (tests/unit/test_store_records.py checks it
against scipy).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from evals.record.run_record import ITEMS_FILE as SOURCE_ITEMS_FILE
from evals.record.run_record_model import RunRecord, TaskRecord
from evals.store._layout import ITEMS_FILE
from evals.store._manifest import MANIFEST_SCHEMA_VERSION

REPORT_FILE = "report.html"  # evals.report.HTML_FILE; not imported: the store sits upstream
TEXT_FIELDS = ("prompt", "baseline_response", "candidate_response")
# Summary keys the manifest carries under their own names; any other (newer) summary field
# is kept whole under "summary_other", so recording never drops what a run wrote.
_SUMMARY_KEYS_KEPT = frozenset({
    "schema_version", "kind", "run_id", "created", "suite_version", "verdict", "exit_code",
    "reason", "gate", "tasks", "arms", "sources", "config", "warnings"})


def utc_iso(value: str | None, fallback: str) -> str:
    """ISO 8601 in UTC with seconds, so that text order is time order."""
    if not value:
        return fallback
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return fallback
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


def _finite(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _standard_error(task: TaskRecord, rows: list[dict]) -> float | None:
    """Paired standard error of the delta: the sample standard deviation (ddof=1) of the
    per-item differences over sqrt(n), as scipy.stats.sem computes it.

    Binary tasks: the differences follow from the flip counts in the summary (the same
    numbers the verdict used). Other metrics: from the paired items, when all are present.
    """
    n = int(task.n or 0)
    if n < 2:
        return None
    if task.binary:
        worse, better = int(task.correct_to_wrong), int(task.wrong_to_correct)
        differences = np.repeat([-1.0, 1.0, 0.0], [worse, better, n - worse - better])
    else:
        differences = np.array([r["candidate"] - r["baseline"] for r in rows
                                if r.get("task") == task.task], dtype=float)
        if differences.size != n:
            return None
    return float(np.std(differences, ddof=1) / np.sqrt(differences.size))


def task_stats(summary: RunRecord, rows: list[dict]) -> list[dict]:
    """One row per task for the index: delta, its standard error and interval, noise floor."""
    out = []
    for task in summary.tasks:
        out.append({
            "task": task.task, "metric": task.metric or "", "gated": task.gated,
            "n": int(task.n or 0), "delta": _finite(task.delta),
            "standard_error": _standard_error(task, rows),
            "ci_low": _finite(task.ci_low), "ci_high": _finite(task.ci_high),
            "noise_flip_rate": _finite(task.noise_flip_rate),
            "noise_flips": task.noise_flips, "verdict": task.verdict})
    return out


def task_results(summary: RunRecord, run_dir: Path) -> list[dict]:
    """Content key -> arm directory, for every task record of every arm (for arm reuse)."""
    out = []
    for arm, info in summary.arms.items():
        path = info.output_dir or str(run_dir / "arms" / arm)
        for task, record in (info.tasks or {}).items():
            if record.key:
                out.append({"key": record.key, "arm": str(arm), "task": str(task),
                            "path": str(path)})
    return out


def _items_facts(summary: RunRecord, rows: list[dict], run_dir: Path) -> dict:
    per_task = Counter(str(r.get("task")) for r in rows)
    notes = []
    if not (run_dir / SOURCE_ITEMS_FILE).exists():
        notes.append(f"{run_dir / SOURCE_ITEMS_FILE} did not exist: no paired items stored")
    else:
        for task in summary.tasks:
            stored, n = per_task.get(task.task, 0), int(task.n or 0)
            if stored != n:
                notes.append(f"task {task.task}: {SOURCE_ITEMS_FILE} held {stored} of its "
                              f"{n} paired items")
    return {"file": ITEMS_FILE, "rows": len(rows), "rows_per_task": dict(sorted(per_task.items())),
            "left_out": {"columns": list(TEXT_FIELDS),
                         "kept_in": str(run_dir / SOURCE_ITEMS_FILE)},
            "notes": notes}


def _sha256(path: Path) -> str | None:
    if not path.exists():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_manifest(record: RunRecord, rows: list[dict], *, run_dir: Path, generation: str,
                   recorded: str, kind: str | None, deployment: str | None) -> dict:
    """The manifest of one run from its record and paired items (`run_dir` is absolute)."""
    summary = record.model_dump()  # the parts the manifest keeps as the run wrote them
    config = record.config
    config_name = config.get("name") if isinstance(config.get("name"), str) else None
    deployment = deployment or config_name or record.kind or "run"
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "generation": generation,
        "run_id": record.run_id,
        "deployment": deployment,
        "kind": kind or record.kind or "run",
        "created": utc_iso(record.created, recorded),
        "recorded": recorded,
        "verdict": record.verdict,
        "exit_code": record.exit_code,
        "reason": record.reason,
        "gate": summary["gate"],
        "suite_version": record.suite_version,
        "summary_schema_version": record.schema_version,
        "config_name": config_name,
        "config": config,
        "arms": summary["arms"],  # effective engine configs, versions, hashes, timings
        "tasks": summary["tasks"],
        "task_stats": task_stats(record, rows),
        "task_results": task_results(record, run_dir),
        "sources": record.sources,
        "warnings": record.warnings,
        "source": {"run_dir": str(run_dir),
                   "report": REPORT_FILE if (run_dir / REPORT_FILE).exists() else None,
                   "paired_items_sha256": _sha256(run_dir / SOURCE_ITEMS_FILE)},
        "items": _items_facts(record, rows, run_dir),
        "summary_other": {k: v for k, v in summary.items() if k not in _SUMMARY_KEYS_KEPT},
    }
