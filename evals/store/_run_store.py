"""RunStore: record finished run directories, list them, pin golden runs, chart their deltas.

Data flows one way: the store reads a run directory's records (summary.json,
paired_items.jsonl) through `evals.record.run_record` and never touches the arms or engines.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from evals.errors import UserError
from evals.store import _index as index
from evals.store._items import items_table, write_items
from evals.store._layout import ENV_VAR, StoreLayout, check_run_id, default_root
from evals.store._manifest import now_iso, write_manifest
from evals.store._run_files import RunFiles
from evals.store._types import RunEntry, SeriesPoint, StoredRun

if TYPE_CHECKING:  # imported where a run is recorded; listing the store does not need it
    from evals.record.run_record_model import RunRecord

_ENTRY_SQL = (
    "SELECT r.run_id, r.generation, r.created, r.recorded, r.kind, r.deployment, r.config_name, "
    "r.verdict, r.exit_code, r.n_tasks, r.n_items, r.source_dir, r.problem, "
    "g.run_id IS NOT NULL FROM runs r "
    "LEFT JOIN golden g ON g.run_id = r.run_id AND g.deployment = r.deployment")


def _entry(row: tuple) -> tuple[RunEntry, str | None]:
    (run_id, generation, created, recorded, kind, deployment, config_name, verdict, exit_code,
     n_tasks, n_items, source_dir, problem, golden) = row
    return RunEntry(run_id=run_id, created=created, recorded=recorded, kind=kind,
                    deployment=deployment, config_name=config_name, verdict=verdict,
                    exit_code=exit_code, n_tasks=n_tasks, n_items=n_items, golden=bool(golden),
                    source_dir=source_dir, problem=problem), generation


def _check_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{what} must be a non-empty name; got {value!r}.")
    return value


class RunStore:
    """A directory of recorded runs: index.sqlite plus runs/<run_id>/{manifest.json,
    items.parquet}. `root` defaults to $EVALS_STORE, else reports/store/."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.layout = StoreLayout(self.root)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    # -- the index ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self, *, create: bool) -> Iterator[sqlite3.Connection | None]:
        """A connection to an index of the current schema, built (from the manifests) when
        missing or older. None when reading a store that does not exist yet."""
        path = self.layout.index
        if not path.exists() and not create and not self.layout.runs.is_dir():
            yield None
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with index.connect(path) as conn:
            version = index.schema_version(conn, path)
            if version is not None:
                index.check_not_newer(version, path)
            if version != index.INDEX_SCHEMA_VERSION:
                self._build_index(conn)
            yield conn

    def _build_index(self, conn: sqlite3.Connection) -> None:
        """Creates a missing index, or migrates an older one: every derived table is rebuilt
        from the manifests and golden pins carry over."""
        with index.transaction(conn):
            version = index.schema_version(conn, self.layout.index)  # another process may
            if version == index.INDEX_SCHEMA_VERSION:                # have built it meanwhile
                return
            pins = index.read_pins(conn) if version is not None else []
            index.create_schema(conn)
            runs = self.layout.runs
            for directory in sorted(runs.iterdir()) if runs.is_dir() else ():
                if directory.is_dir():
                    self._reindex_run(conn, directory)
            for deployment, run_id, pinned in pins:
                conn.execute(
                    "INSERT INTO golden SELECT ?, run_id, ? FROM runs WHERE run_id = ? AND "
                    "deployment = ?", (deployment, pinned, run_id, deployment))

    def _reindex_run(self, conn: sqlite3.Connection, directory: Path) -> None:
        files = RunFiles(self.layout, directory.name)
        if not (files.manifest.exists() or files.previous_manifest.exists()):
            return  # not a run directory (e.g. an empty one left by an interrupted record)
        generation = files.consistent_generation()
        try:
            manifest = files.read_manifest(generation)
            if generation is None or manifest.get("run_id") != directory.name:
                raise UserError(f"{files.manifest}: does not match {files.items} (or names "
                                "another run); record the run again.")
        except UserError as exc:
            when = datetime.fromtimestamp(directory.stat().st_mtime, timezone.utc)
            index.insert_broken_run(conn, directory.name, when.isoformat(timespec="seconds"),
                                    "", str(exc))
            return
        index.upsert_run(conn, manifest)

    def _lookup(self, conn: sqlite3.Connection | None, run_id: str) -> tuple[RunEntry, str | None]:
        row = None if conn is None else \
            conn.execute(f"{_ENTRY_SQL} WHERE r.run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"run {run_id!r} is not in the store at {self.root}; "
                            "`python -m evals runs` lists the recorded runs.")
        return _entry(row)

    # -- writing -----------------------------------------------------------------------

    def record_run(self, run_dir: Path | str, *, kind: str | None = None,
                   deployment: str | None = None, replace_run: bool = True) -> StoredRun:
        """Stores a finished run directory (summary.json + paired_items.jsonl): its manifest,
        its paired items as Parquet and its index rows. Recording a run_id again replaces it.

        `kind` defaults to the summary's kind; `deployment` (what the run tracks over time)
        to the config's name. The files are written under temporary names and renamed into
        place, then the index commits in one transaction; a crash at any point leaves the
        previous state readable.
        """
        # the record path needs the run records (pydantic models); listing should not pay
        # for importing them
        from evals.record.run_record import SUMMARY_FILE, read_paired_items, read_run_record
        from evals.store._manifest_builder import build_manifest

        run_dir = Path(run_dir).resolve()
        summary = read_run_record(run_dir)
        rows = read_paired_items(run_dir)
        run_id = check_run_id(summary.run_id, str(run_dir / SUMMARY_FILE))
        if kind is not None:
            _check_name(kind, "kind")
        if deployment is not None:
            _check_name(deployment, "deployment")
        generation = uuid.uuid4().hex
        manifest = build_manifest(summary, rows, run_dir=run_dir, generation=generation,
                                  recorded=now_iso(), kind=kind, deployment=deployment)
        table = items_table(rows, summary, run_id=run_id, generation=generation)
        files = RunFiles(self.layout, run_id)
        with self._connection(create=True) as conn, index.transaction(conn):
            row = conn.execute("SELECT generation FROM runs WHERE run_id = ?",
                               (run_id,)).fetchone()
            if row:
                self._check_replace(conn, run_id, summary, replace_run)
            files.directory.mkdir(parents=True, exist_ok=True)
            files.recover(row[0] if row else None)
            files.keep_previous()
            write_items(files.items, table)
            write_manifest(files.manifest, manifest)
            index.upsert_run(conn, manifest)
        files.drop_previous()
        return self.get(run_id)

    @staticmethod
    def _check_replace(conn, run_id: str, summary: RunRecord, replace_run: bool) -> None:
        """A recorded run is replaced only by the same run resumed (allowed for `ab` and
        `drift`, which rerun into the same id) and never once it is a pinned golden run:
        a golden run keeps its meaning forever."""
        created, = conn.execute("SELECT created FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if created == summary.created:
            return  # the same result recorded again
        pinned = [d for d, in conn.execute("SELECT deployment FROM golden WHERE run_id = ?",
                                           (run_id,))]
        if pinned:
            raise UserError(f"run {run_id} is the pinned golden run of {', '.join(pinned)}; its "
                            "record is never replaced. Record the new result under another "
                            "run id (another config name), then pin that one.")
        if not replace_run:
            raise UserError(f"run {run_id} is already recorded with another result (created "
                            f"{created}); pass --replace to overwrite it.")

    def pin(self, run_id: str, deployment: str) -> RunEntry:
        """Marks `run_id` as the golden run of `deployment` (replacing any earlier pin)."""
        _check_name(deployment, "deployment")
        with self._connection(create=False) as conn:
            entry, _ = self._lookup(conn, run_id)
            if entry.deployment != deployment:
                raise UserError(f"run {run_id!r} was recorded for deployment "
                                f"{entry.deployment!r}, not {deployment!r}; pin it with "
                                f"--deployment {entry.deployment}, or record it again with "
                                f"deployment {deployment!r}.")
            if entry.problem:
                raise UserError(f"run {run_id!r} cannot be pinned: {entry.problem}")
            with index.transaction(conn):
                conn.execute("INSERT OR REPLACE INTO golden VALUES (?, ?, ?)",
                             (deployment, run_id, now_iso()))
            return self._lookup(conn, run_id)[0]

    # -- reading -----------------------------------------------------------------------

    def list_runs(self, limit: int | None = 20, deployment: str | None = None, *,
                  verify: bool = False) -> tuple[RunEntry, ...]:
        """The newest runs first, from the index alone. With `verify`, each listed run's
        manifest and Parquet footer are read too, and a run whose files are broken is kept
        in the list with `problem` set rather than dropped."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise UserError(f"limit must be a whole number of runs >= 1; got {limit!r}.")
        with self._connection(create=False) as conn:
            if conn is None:
                return ()
            rows = conn.execute(
                f"{_ENTRY_SQL} WHERE ? IS NULL OR r.deployment = ? "
                "ORDER BY r.created DESC, r.recorded DESC, r.run_id LIMIT ?",
                (deployment, deployment, -1 if limit is None else limit)).fetchall()
        entries = [_entry(row) for row in rows]
        if not verify:
            return tuple(entry for entry, _ in entries)
        return tuple(entry if entry.problem else
                     replace(entry, problem=RunFiles(self.layout, entry.run_id).check(generation))
                     for entry, generation in entries)

    def get(self, run_id: str) -> StoredRun:
        """The run's index entry and manifest; a UserError naming the file if it is broken."""
        with self._connection(create=False) as conn:
            entry, generation = self._lookup(conn, run_id)
        files = RunFiles(self.layout, run_id)
        return StoredRun(entry=entry, manifest=files.read_manifest(generation),
                         directory=files.directory)

    def items(self, run_id: str) -> pa.Table:
        """The run's paired items (see `evals.store._items` for the columns)."""
        with self._connection(create=False) as conn:
            _, generation = self._lookup(conn, run_id)
        return RunFiles(self.layout, run_id).read_items(generation)

    def golden(self, deployment: str) -> RunEntry | None:
        """The pinned golden run of `deployment`, or None."""
        with self._connection(create=False) as conn:
            if conn is None:
                return None
            row = conn.execute(f"{_ENTRY_SQL} WHERE g.deployment = ?", (deployment,)).fetchone()
        return None if row is None else _entry(row)[0]

    def deployments(self) -> tuple[str, ...]:
        with self._connection(create=False) as conn:
            if conn is None:
                return ()
            rows = conn.execute("SELECT DISTINCT deployment FROM runs WHERE problem IS NULL "
                                "ORDER BY deployment").fetchall()
        return tuple(row[0] for row in rows)

    def tasks(self, deployment: str) -> tuple[str, ...]:
        """Tasks that any run of `deployment` has, by name."""
        with self._connection(create=False) as conn:
            if conn is None:
                return ()
            rows = conn.execute(
                "SELECT DISTINCT t.task FROM run_tasks t JOIN runs r USING (run_id) "
                "WHERE r.deployment = ? ORDER BY t.task", (deployment,)).fetchall()
        return tuple(row[0] for row in rows)

    def series(self, deployment: str, task: str) -> tuple[SeriesPoint, ...]:
        """`task`'s delta in every run of `deployment` that has one, oldest first."""
        with self._connection(create=False) as conn:
            if conn is None:
                return ()
            rows = conn.execute(
                "SELECT r.run_id, r.created, t.metric, t.n, t.delta, t.standard_error, t.ci_low, "
                "t.ci_high, t.noise_flip_rate, t.noise_flips, t.verdict, g.run_id IS NOT NULL "
                "FROM run_tasks t JOIN runs r USING (run_id) LEFT JOIN golden g "
                "ON g.run_id = r.run_id AND g.deployment = r.deployment "
                "WHERE r.deployment = ? AND t.task = ? AND t.delta IS NOT NULL "
                "ORDER BY r.created, r.recorded, r.run_id", (deployment, task)).fetchall()
        return tuple(SeriesPoint(*row[:-1], golden=bool(row[-1])) for row in rows)

    def find_task_result(self, key: str) -> Path | None:
        """The arm directory of the most recently recorded run whose arm finished the task
        with this content key (`ArmSpec.key_for(task)`), if that directory still exists."""
        found = self.task_result_sources(key)
        return found[0][1] if found else None

    def task_result_sources(self, key: str) -> list[tuple[str, Path]]:
        """(run id, arm directory) of every recorded run whose arm finished the task with
        this content key and whose directory still exists, the most recent first."""
        with self._connection(create=False) as conn:
            if conn is None:
                return []
            rows = conn.execute(
                "SELECT tr.run_id, tr.path FROM task_results tr JOIN runs r USING (run_id) "
                "WHERE tr.key = ? ORDER BY r.recorded DESC, r.run_id", (key,)).fetchall()
        return [(run_id, Path(path)) for run_id, path in rows if Path(path).is_dir()]


def open_store(reports_dir: Path, store_root: Path | None = None):
    """The run store: --store, else $EVALS_STORE, else <reports>/store."""
    if store_root is None and not os.environ.get(ENV_VAR):
        store_root = Path(reports_dir) / "store"
    return RunStore(store_root)


def record_in_store(store, run_dir: Path, *, kind: str, deployment: str | None,
                    echo=print) -> None:
    """Finished work is never lost to a broken store: a store problem is a warning."""
    try:
        stored = store.record_run(run_dir, kind=kind, deployment=deployment)
        echo(f"[evals] recorded as {stored.run_id} in {store.root}")
    except UserError as exc:
        echo(f"warning: the run was not recorded in the run store: {exc}")
