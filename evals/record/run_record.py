"""The stored outputs of one comparison: summary.json and paired_items.jsonl.

Both carry `schema_version` as their first field. Readers refuse newer versions and
migrate older ones in `migrate_summary`, the one place that knows old layouts.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from evals import __version__
from evals.decide.outcome import Verdict
from evals.errors import UserError
from evals.record.load_curve_record import LoadCurveRecord
from evals.schemas import PAIRED_ITEMS, SUMMARY
from evals.record.run_record_model import GateRecord, GateStepRecord, RunRecord, TaskRecord
from evals.text_hygiene import one_line

if TYPE_CHECKING:  # the writers' inputs; a reader of a finished run needs no statistics
    from evals.analyse.task_analysis import TaskAnalysis
    from evals.decide.verdict import RunVerdict
    from evals.pair.pairing import PairedTask

SUMMARY_SCHEMA_VERSION = SUMMARY.version
SUMMARY_FILE = "summary.json"
ITEMS_FILE = "paired_items.jsonl"


def _plain(obj):
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Enum):
        return obj.value
    return obj


def shift_record(shift) -> dict:
    """One task's distribution-shift analysis (evals.analyse.shift.ShiftAnalysis) as stored
    in summary.json's `shift.tasks`."""
    return _plain(shift)


def build_summary(*, kind: str, run_id: str, config: dict, analyses: list[TaskAnalysis],
                  verdict: RunVerdict, arms: dict[str, dict], sources: dict[str, str],
                  warnings: list[str], speed=None, cache_stress=(),
                  platform: dict | None = None, drift: dict | None = None, gates=None,
                  exercise: dict | None = None, faults: dict | None = None,
                  preflight: dict | None = None, shift: dict | None = None,
                  load_curve: LoadCurveRecord | None = None) -> RunRecord:
    """The run's record (summary.json). The optional parts are left out when absent: `drift`
    (a drift run's chart), `exercise`, `faults` (canary faults per arm), `preflight` (the
    doctor and the audit), `load_curve` (the load sweep); `gates` lists the gate steps
    (evals.decide.gates.GateStep)."""
    optional = {"drift": drift, "exercise": exercise, "faults": faults or None,
                "preflight": preflight, "shift": shift, "load_curve": load_curve,
                "gates": None if gates is None else [
                    GateStepRecord(gate=g.gate, verdict=g.verdict, changed=g.changed)
                    for g in gates]}
    by_task = {t.task: t for t in verdict.tasks}
    tasks = [TaskRecord(**_plain(a), verdict=by_task[a.task].verdict.value,
                        regression_pvalue_adjusted=by_task[a.task].regression_pvalue_adjusted,
                        reason=by_task[a.task].reason) for a in analyses]
    return RunRecord(
        kind=kind, run_id=run_id,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        suite_version=__version__, platform=platform, verdict=verdict.verdict.value,
        exit_code=int(verdict.exit_code), reason=verdict.reason,
        gate=GateRecord(alpha=verdict.alpha, margin=verdict.margin,
                        correction=verdict.correction),
        tasks=tasks, arms=arms, sources=sources, config=config, warnings=warnings,
        speed=_plain(speed),
        cache_stress=[dict(_plain(c), disagreement=c.disagreement) for c in cache_stress],
        pooled=_plain(verdict.pooled), **{k: v for k, v in optional.items() if v is not None})


def write_paired_items(path: Path, paired: list[PairedTask]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(PAIRED_ITEMS.stamp({})) + "\n")
        for p in paired:
            for i, (rb, rc) in enumerate(zip(p.baseline_records, p.candidate_records)):
                handle.write(json.dumps({
                    "task": p.task, "doc_id": p.doc_ids[i], "metric": p.metric,
                    "baseline": float(p.baseline[i]), "candidate": float(p.candidate[i]),
                    "target": rb.target, "prompt": rb.prompt,
                    "baseline_prediction": rb.prediction, "candidate_prediction": rc.prediction,
                    "baseline_response": rb.response, "candidate_response": rc.response,
                }, ensure_ascii=False) + "\n")
    tmp.replace(path)


def write_run(run_dir: Path, record: RunRecord, paired: list[PairedTask]) -> None:
    """The one writer of a run directory's records: summary.json and paired_items.jsonl."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_paired_items(run_dir / ITEMS_FILE, paired)
    SUMMARY.write(run_dir / SUMMARY_FILE, record.model_dump())


_REQUIRED = {"kind": str, "run_id": str, "verdict": str, "exit_code": int, "reason": str,
             "gate": dict, "tasks": list}
_TASK_REQUIRED = {"task": str, "verdict": str}


def migrate_summary(data: dict, where: Path) -> RunRecord:
    """The record in a summary.json's parsed `data`, migrated from an older version; a
    UserError naming `where` when it is newer than this suite or not a run's summary."""
    data = SUMMARY.load(data, str(where))
    for key, kind in _REQUIRED.items():
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            raise UserError(f"{where}: `{key}` is missing or not a {kind.__name__}; not a "
                            "summary written by this suite (or a damaged one).")
    for index, task in enumerate(data["tasks"]):
        if not isinstance(task, dict) or any(not isinstance(task.get(k), t)
                                             for k, t in _TASK_REQUIRED.items()):
            raise UserError(f"{where}: tasks[{index}] lacks `task` or `verdict`.")
    if data["verdict"] not in Verdict.__members__:
        raise UserError(f"{where}: verdict {one_line(data['verdict'])!r} is none of "
                        f"{', '.join(Verdict.__members__)}; not a summary written by this suite.")
    return RunRecord.from_stored(data, where)


def read_run_record(path: Path) -> RunRecord:
    """The one reader of summary.json: `path` is a run directory or its summary.json."""
    path = Path(path)
    if path.name != SUMMARY_FILE:
        path = path / SUMMARY_FILE
    if not path.exists():
        raise UserError(f"{path.parent}: no {SUMMARY_FILE}; is this a run directory under "
                        "reports/?")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise UserError(f"{path}: not valid JSON (truncated or corrupted).") from None
    return migrate_summary(data, path)


def read_summary(run_dir: Path) -> dict:
    """summary.json's layout as a plain dict (read through `read_run_record`), for tools and
    tests that look at the file itself rather than the model."""
    return read_run_record(run_dir).model_dump()


def read_paired_items(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / ITEMS_FILE
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as handle:
        try:
            header = json.loads(handle.readline() or "{}")
        except json.JSONDecodeError:
            raise UserError(f"{path}, line 1: not valid JSON (truncated?).") from None
        PAIRED_ITEMS.load(header, f"{path}, line 1")
        for line_no, line in enumerate(handle, 2):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise UserError(f"{path}, line {line_no}: not valid JSON (truncated?).") from None
    return rows
