"""index.sqlite: one row per run, per (run, task) and per arm task result, plus golden pins.

Everything but the pins is derived from the runs' manifests. The `meta` table holds the
index's schema_version: an older index is migrated by rebuilding the derived tables from
the manifests (pins carry over); a newer one is refused, so an old suite never rewrites a
newer suite's index. Writes take SQLite's write lock first (BEGIN IMMEDIATE), which also
serialises two processes recording at once.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from evals.errors import UserError

INDEX_SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, generation TEXT, created TEXT NOT NULL, recorded TEXT NOT NULL,
    kind TEXT NOT NULL, deployment TEXT NOT NULL, config_name TEXT, verdict TEXT,
    exit_code INTEGER, suite_version TEXT, n_tasks INTEGER NOT NULL, n_items INTEGER NOT NULL,
    source_dir TEXT NOT NULL, problem TEXT);
CREATE INDEX runs_by_deployment ON runs (deployment, created);
CREATE INDEX runs_by_created ON runs (created);
CREATE TABLE run_tasks (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE, task TEXT NOT NULL,
    metric TEXT, gated INTEGER, n INTEGER, delta REAL, standard_error REAL, ci_low REAL,
    ci_high REAL, noise_flip_rate REAL, noise_flips INTEGER, verdict TEXT,
    PRIMARY KEY (run_id, task));
CREATE INDEX run_tasks_by_task ON run_tasks (task);
CREATE TABLE task_results (
    key TEXT NOT NULL, run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    arm TEXT NOT NULL, task TEXT NOT NULL, path TEXT NOT NULL,
    PRIMARY KEY (key, run_id, arm, task));
CREATE TABLE golden (deployment TEXT PRIMARY KEY, run_id TEXT NOT NULL, pinned TEXT NOT NULL);
"""

RUN_COLUMNS = ("run_id", "generation", "created", "recorded", "kind", "deployment",
               "config_name", "verdict", "exit_code", "suite_version", "n_tasks", "n_items",
               "source_dir", "problem")
TASK_COLUMNS = ("task", "metric", "gated", "n", "delta", "standard_error", "ci_low", "ci_high",
                "noise_flip_rate", "noise_flips", "verdict")


def corrupted(path: Path, exc: Exception) -> UserError:
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return UserError(f"{path}: locked by another process for 30 s (a long record or an "
                         "interrupted one still running?); try again when it has finished.")
    return UserError(
        f"{path}: not a readable SQLite index (corrupted or truncated: {exc}); move it aside "
        "and run the command again: the index is rebuilt from runs/*/manifest.json (golden "
        "pins are lost and must be set again with `python -m evals pin`).")


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode; SQLite errors become a UserError naming the file."""
    conn = None
    try:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        yield conn
    except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
        raise  # our own mistakes, not the file's
    except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed", ...
        if conn is not None and conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise corrupted(path, exc) from None
    finally:
        if conn is not None:
            conn.close()


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT; anything raised (or a crash) rolls back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def schema_version(conn: sqlite3.Connection, path: Path) -> int | None:
    """The index's schema_version; None for an empty database (a new store)."""
    names = tables(conn)
    if not names:
        return None
    if "meta" not in names:
        raise UserError(f"{path}: has no `meta` table; not a run-store index (move it aside, "
                        "and it is rebuilt from runs/*/manifest.json).")
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise UserError(f"{path}: no valid schema_version in its `meta` table; not a run-store "
                        "index.") from None


def check_not_newer(version: int, path: Path) -> None:
    if version > INDEX_SCHEMA_VERSION:
        raise UserError(f"{path}: schema_version {version} is newer than this suite reads "
                        f"({INDEX_SCHEMA_VERSION}); upgrade vllm-regression-evals.")


def read_pins(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """Golden pins of an index of any version (the `golden` table has had one layout)."""
    if "golden" not in tables(conn):
        return []
    return [tuple(row) for row in conn.execute("SELECT deployment, run_id, pinned FROM golden")]


def create_schema(conn: sqlite3.Connection) -> None:
    """Drops every table, then creates the current schema (inside the caller's transaction)."""
    for name in tables(conn):
        conn.execute(f'DROP TABLE "{name}"')
    for statement in SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(INDEX_SCHEMA_VERSION),))


def upsert_run(conn: sqlite3.Connection, manifest: dict) -> None:
    """Replaces the run's rows from its manifest (inside the caller's transaction). A pin
    survives re-recording unless the run moved to another deployment."""
    run_id = manifest["run_id"]
    conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))  # cascades to its task rows
    conn.execute("DELETE FROM golden WHERE run_id = ? AND deployment != ?",
                 (run_id, manifest["deployment"]))
    stats = manifest.get("task_stats", [])
    conn.execute(
        f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
        (run_id, manifest["generation"], manifest["created"], manifest["recorded"],
         manifest["kind"], manifest["deployment"], manifest.get("config_name"),
         manifest.get("verdict"), manifest.get("exit_code"), manifest.get("suite_version"),
         len(stats), int(manifest["items"]["rows"]), manifest["source"]["run_dir"], None))
    conn.executemany(
        f"INSERT INTO run_tasks (run_id, {', '.join(TASK_COLUMNS)}) "
        f"VALUES (?, {', '.join('?' * len(TASK_COLUMNS))})",
        [(run_id, *(s.get(c) for c in TASK_COLUMNS)) for s in stats])
    conn.executemany(
        "INSERT OR REPLACE INTO task_results (key, run_id, arm, task, path) VALUES (?, ?, ?, ?, ?)",
        [(r["key"], run_id, r["arm"], r["task"], r["path"])
         for r in manifest.get("task_results", [])])


def insert_broken_run(conn: sqlite3.Connection, run_id: str, when: str, source_dir: str,
                      problem: str) -> None:
    """A run whose manifest cannot be read during a rebuild: listed, marked, not charted."""
    conn.execute(
        "INSERT OR REPLACE INTO runs (run_id, generation, created, recorded, kind, deployment, "
        "n_tasks, n_items, source_dir, problem) VALUES (?, NULL, ?, ?, '?', '?', 0, 0, ?, ?)",
        (run_id, when, when, source_dir, problem))
