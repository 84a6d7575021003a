"""items.parquet of a stored run: one row per paired item, columnar (pyarrow).

Columns: task, filter, doc_id, metric, baseline, candidate (the per-item metric values),
change (sign of candidate - baseline: -1 worse, 0 same, +1 better), target,
baseline_prediction, candidate_prediction. The prompt and both raw responses stay out:
they are most of the bytes of paired_items.jsonl (the prompt alone repeats a few-shot
block per item), the same prompts recur in every run of a deployment, and reading them
is a per-run forensic task that the run's own report.html and paired_items.jsonl serve.
The manifest records where those are and their sha256.

The schema version and the run's generation token are in the Parquet key-value metadata.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from evals.errors import UserError

if TYPE_CHECKING:  # the record path imports the model; listing the store does not
    from evals.record.run_record_model import RunRecord

ITEMS_SCHEMA_VERSION = 1
VERSION_KEY = b"evals.items.schema_version"
GENERATION_KEY = b"evals.generation"
RUN_ID_KEY = b"evals.run_id"

ITEMS_SCHEMA = pa.schema([
    ("task", pa.string()), ("filter", pa.string()), ("doc_id", pa.int64()),
    ("metric", pa.string()), ("baseline", pa.float64()), ("candidate", pa.float64()),
    ("change", pa.int8()), ("target", pa.string()), ("baseline_prediction", pa.string()),
    ("candidate_prediction", pa.string()),
])


def _text(value) -> str | None:
    return None if value is None else str(value)


def items_table(rows: list[dict], summary: RunRecord, *, run_id: str,
                generation: str) -> pa.Table:
    """The Parquet table of a run's paired items (rows as read from paired_items.jsonl).

    Built by Arrow's JSON reader from one JSON line per item under the fixed schema, not by
    `pa.array`/`pa.table`: those ask pyarrow's pandas shim whether the lists are pandas
    objects, which imports pandas (0.3-1 s of every `compare` and `ab`). Python writes each
    float as its shortest round-trip repr and Arrow parses it correctly rounded, so the
    values are the same bits."""
    import pyarrow.json as pa_json

    filters = {t.task: t.filter for t in summary.tasks}
    lines = []
    for r in rows:
        baseline, candidate = float(r["baseline"]), float(r["candidate"])
        lines.append(json.dumps({
            "task": str(r["task"]), "filter": _text(filters.get(str(r["task"]))),
            "doc_id": int(r["doc_id"]), "metric": str(r.get("metric", "")),
            "baseline": baseline, "candidate": candidate,
            "change": (candidate > baseline) - (candidate < baseline),
            "target": _text(r.get("target")),
            "baseline_prediction": _text(r.get("baseline_prediction")),
            "candidate_prediction": _text(r.get("candidate_prediction"))},
            ensure_ascii=False, allow_nan=False))
    metadata = {VERSION_KEY: str(ITEMS_SCHEMA_VERSION).encode(),
                GENERATION_KEY: generation.encode(), RUN_ID_KEY: run_id.encode()}
    if not lines:  # the reader needs a line to parse
        return ITEMS_SCHEMA.empty_table().replace_schema_metadata(metadata)
    table = pa_json.read_json(
        io.BytesIO("\n".join(lines).encode("utf-8")),
        parse_options=pa_json.ParseOptions(explicit_schema=ITEMS_SCHEMA,
                                           unexpected_field_behavior="error"))
    return table.replace_schema_metadata(metadata)


def write_items(path: Path, table: pa.Table) -> None:
    """Write-then-rename, so a crash leaves the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            pq.write_table(table, handle, compression="zstd")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_metadata(metadata: dict | None, path: Path) -> str:
    """The generation token, after checking the schema version."""
    metadata = metadata or {}
    try:
        version = int(metadata[VERSION_KEY])
    except (KeyError, ValueError):
        raise UserError(f"{path}: no {VERSION_KEY.decode()} in its metadata; not a run-store "
                        "items file.") from None
    if version > ITEMS_SCHEMA_VERSION:
        raise UserError(f"{path}: schema_version {version} is newer than this suite reads "
                        f"({ITEMS_SCHEMA_VERSION}); upgrade vllm-regression-evals.")
    return metadata.get(GENERATION_KEY, b"").decode()


def _unreadable(path: Path, exc: Exception) -> UserError:
    if isinstance(exc, FileNotFoundError):
        return UserError(f"{path}: missing; the run's store directory is incomplete (record the "
                         "run again).")
    return UserError(f"{path}: not a readable Parquet file (truncated or corrupted: "
                     f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                     "record the run again.")


def items_generation(path: Path) -> str:
    """The generation token in the file's footer (reads only the footer)."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(path, exc) from None
    return _check_metadata(schema.metadata, path)


def read_items(path: Path) -> tuple[pa.Table, str]:
    """The table (version 1 layout) and its generation token."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(path, exc) from None
    generation = _check_metadata(table.schema.metadata, path)
    return table, generation  # version 1 is the only layout so far
