"""Every JSON record the suite writes carries `schema_version` as its first key, and each
kind of record has one reader that checks it: an older version is migrated step by step
to the current one, a newer one is refused with a message naming the file (as inspect_ai
does for its eval logs). Records written before they carried a version count as version 0.

The kinds, where they live and who writes them:

| kind          | file                               | writer                     |
|---------------|------------------------------------|----------------------------|
| arm spec      | <arm>/spec.json                    | evals.plan.arm_spec.ArmSpec     |
| arm manifest  | <arm>/manifest.json                | the runner's worker        |
| task marker   | <arm>/tasks/<task>.json            | the worker; evals.dispatch.reuse    |
| chunk marker  | <arm>/chunks/<task>/<k>/done.json  | the worker                 |
| speed record  | <arm>/speed/<task>.json            | the worker                 |
| load sweep    | <arm>/load_sweep.json              | the worker (evals.runner.load_sweep) |
| fault tally   | <arm>/fault_tally/<pid>.json       | evals.faults.vllm_plugin   |
| drift chart   | summary.json `drift.charts.<task>` | evals.decide.drift                |

| summary       | <run>/summary.json                 | evals.record.run_record           |
| paired items  | <run>/paired_items.jsonl (line 1)  | evals.record.run_record           |
| store manifest| <store>/runs/<id>/manifest.json    | evals.store                |
| canary record | <canary>/canary.json               | evals.pipelines.canary     |
| release record| <release>/release.json             | evals.record.release_record |

The run store's SQLite index and its Parquet items table carry their version in their
own metadata (evals.store._index, evals.store._items) and check it the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from evals.atomic_files import write_json_atomic
from evals.errors import UserError

KEY = "schema_version"


def _stamp_only(data: dict) -> dict:
    """The migration of a record that had no version yet: same content, now versioned."""
    return dict(data)


def check_version(data: object, current: int, where: str, what: str, *,
                  unversioned: bool = True) -> int:
    """The record's schema_version (0 when it has none and `unversioned` records exist); a
    UserError when the record is not a JSON object, has no version although every record
    of its kind had one, its version is not a whole number, or it is newer than `current`."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: a {what} must be a JSON object, got {type(data).__name__}.")
    if KEY not in data and not unversioned:
        raise UserError(f"{where}: no schema_version; not a {what} written by this suite.")
    version = data.get(KEY, 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise UserError(f"{where}: schema_version {version!r} is not a version number.")
    if version > current:
        raise UserError(f"{where}: schema_version {version} is newer than this suite reads "
                        f"({current}) for a {what}; upgrade vllm-regression-evals.")
    return version


@dataclass(frozen=True)
class RecordKind:
    """One kind of record: its current version and the migrations to it.

    `migrations[v]` turns a version-v record into a version-(v + 1) one."""

    name: str
    version: int
    migrations: Mapping[int, Callable[[dict], dict]] = field(default_factory=dict)

    def stamp(self, data: dict) -> dict:
        """`data` with this kind's current version as its first key."""
        return {KEY: self.version, **{k: v for k, v in data.items() if k != KEY}}

    def load(self, data: object, where: str) -> dict:
        """The record at the current version (migrated when older)."""
        version = check_version(data, self.version, where, self.name,
                                unversioned=0 in self.migrations)
        record = dict(data)  # type: ignore[arg-type]
        while version < self.version:
            record = self.migrations[version](record)
            version += 1
            record[KEY] = version
        return self.stamp(record)

    def read(self, path: Path) -> dict:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{path}: unreadable {self.name} ({exc}).") from None
        return self.load(data, str(path))

    def write(self, path: Path, data: dict) -> None:
        write_json_atomic(Path(path), self.stamp(data), sort_keys=False)


def _spec_v1_to_v2(data: dict) -> dict:
    """v2 moved the sequential stop rule out of the runner: the candidate no longer names the
    baseline's directory and looks itself; it asks the parent (evals.runner.asks)."""
    seq = data.get("sequential")
    if seq and "reference" in seq:
        new = {"chunk": seq["chunk"]}
        if seq.get("reference"):
            new.update(look=True, stop_rule=[seq.get("alpha"), seq.get("margin"),
                                             seq.get("metrics")])
        data = {**data, "sequential": new}
    return data


def _spec_v2_to_v3(data: dict) -> dict:
    """v3 records the machine's kernel key (`platform`); a v2 spec's machine is unknown."""
    return {**data, "platform": data.get("platform", {})}


def _spec_v3_to_v4(data: dict) -> dict:
    """v4 keys replicates and task inputs (issue 50); a v3 spec was replicate 0 and its
    task inputs are unknown (its keys differ from v4's, so nothing of it is reused)."""
    return {**data, "replicate": data.get("replicate", 0),
            "task_inputs": data.get("task_inputs", {})}


def _summary_v1_to_v2(data: dict) -> dict:
    """v2 is the typed RunRecord (evals.record.run_record_model), where every task says
    whether it is gated; a v1 reader took a task that did not say as gated."""
    tasks = data.get("tasks")
    if isinstance(tasks, list):
        tasks = [{**t, "gated": t.get("gated", True)} if isinstance(t, dict) else t
                 for t in tasks]
        data = {**data, "tasks": tasks}
    return data


def _typed_parts(data: dict) -> dict:
    """Summary v3, study v2 and canary v2 read every part of the record as a typed model
    (evals.record: run_parts, task_parts, arm_record, shift_record, preflight_record,
    drift_record, study_record, canary_record) instead of a free dict. The older files'
    parts already have the layout of those models, so their content carries over as it
    is; the reader then checks each part's shape and names a field that does not fit."""
    return dict(data)


def _tally_v0_to_v1(data: dict) -> dict:
    """v0 was the bare {fault: count} map."""
    return {"fired": {k: v for k, v in data.items() if k != KEY}}


# kinds with their own readers (they call `load`): every one of these always had a version
SUMMARY = RecordKind("summary", 3, {1: _summary_v1_to_v2, 2: _typed_parts})
PAIRED_ITEMS = RecordKind("paired-items file", 1, {0: _stamp_only})  # its header line
STORE_MANIFEST = RecordKind("run-store manifest", 1)
CANARY = RecordKind("canary record", 2, {1: _typed_parts})
STUDY = RecordKind("study summary", 2, {1: _typed_parts})
RELEASE = RecordKind("release record", 1)

ARM_SPEC = RecordKind("arm spec", 4, {0: _stamp_only, 1: _spec_v1_to_v2, 2: _spec_v2_to_v3,
                                     3: _spec_v3_to_v4})
ARM_MANIFEST = RecordKind("arm manifest", 1, {0: _stamp_only})
TASK_MARKER = RecordKind("task marker", 1, {0: _stamp_only})
CHUNK_MARKER = RecordKind("chunk marker", 1, {0: _stamp_only})
SPEED_RECORD = RecordKind("speed record", 1, {0: _stamp_only})
LOAD_SWEEP = RecordKind("load sweep", 1)  # always versioned (evals.runner.load_sweep)
LOGPROBS_HEADER = RecordKind("logprobs file", 1)  # its header line (evals.runner.logprob_capture)
REPEAT_SCORES = RecordKind("repeat scores", 1)  # every repeat's score (evals.runner.repeat_scores)
FAULT_TALLY = RecordKind("fault tally", 1, {0: _tally_v0_to_v1})
DRIFT_CHART = RecordKind("drift chart", 1, {0: _stamp_only})

KINDS = (ARM_SPEC, ARM_MANIFEST, TASK_MARKER, CHUNK_MARKER, SPEED_RECORD, LOGPROBS_HEADER,
         REPEAT_SCORES,
         FAULT_TALLY, DRIFT_CHART, SUMMARY, PAIRED_ITEMS, STORE_MANIFEST, CANARY, STUDY, RELEASE,
         LOAD_SWEEP)
