"""Broken store files: clear errors naming the file, the other runs stay readable; index
schema versions: older migrated, newer refused, missing rebuilt."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from synthetic_runs import PlantedTask, write_synthetic_run

from evals.errors import UserError
from evals.store import INDEX_SCHEMA_VERSION, RunStore


@pytest.fixture
def store(tmp_path) -> RunStore:
    """Three runs of deployment `dep`, the middle one pinned."""
    store = RunStore(tmp_path / "store")
    for i in range(3):
        run = write_synthetic_run(
            tmp_path / "runs" / f"r{i}", run_id=f"r{i}", created=f"2026-01-0{i + 1}T00:00:00Z",
            tasks=[PlantedTask("t", 300, 10 + i, 10)], rng=np.random.default_rng(i),
            config_name="dep")
        store.record_run(run)
    store.pin("r1", "dep")
    return store


def test_a_corrupted_manifest_names_the_file_and_the_others_stay_readable(store):
    path = store.layout.manifest("r1")
    path.write_text(path.read_text()[:200])  # truncated
    with pytest.raises(UserError, match=f"{path}: not valid JSON"):
        store.get("r1")
    listed = {e.run_id: e for e in store.list_runs(verify=True)}
    assert set(listed) == {"r0", "r1", "r2"}  # marked, not dropped
    assert str(path) in listed["r1"].problem
    assert listed["r0"].problem is None and listed["r2"].problem is None
    assert store.get("r0").manifest["run_id"] == "r0"
    assert store.items("r2").num_rows == 300
    assert len(store.series("dep", "t")) == 3  # the index alone serves the series


def test_a_truncated_items_file_names_the_file(store):
    path = store.layout.items("r2")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(UserError, match=f"{path}: not a readable Parquet file"):
        store.items("r2")
    assert store.get("r2").manifest["run_id"] == "r2"
    problems = {e.run_id: e.problem for e in store.list_runs(verify=True)}
    assert str(path) in problems["r2"] and problems["r0"] is None


def test_a_missing_items_file_names_the_file(store):
    store.layout.items("r0").unlink()
    with pytest.raises(UserError, match="items.parquet: missing"):
        store.items("r0")


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupted_index_names_the_file(store, damage):
    path = store.layout.index
    data = path.read_bytes()
    path.write_bytes(b"not a database at all " * 200 if damage == "garbage"
                     else data[: len(data) // 3])
    with pytest.raises(UserError, match=f"{path}: not a readable SQLite index") as info:
        store.list_runs()
    assert "rebuilt from runs/*/manifest.json" in str(info.value)


def test_a_missing_index_is_rebuilt_from_the_manifests(store):
    store.layout.index.unlink()
    assert [e.run_id for e in store.list_runs()] == ["r2", "r1", "r0"]
    assert [p.delta for p in store.series("dep", "t")] == pytest.approx([0, -1 / 300, -2 / 300])
    assert store.golden("dep") is None  # pins live in the index only


def test_a_rebuild_lists_a_run_whose_manifest_is_broken(store):
    store.layout.manifest("r0").write_text("{")
    store.layout.index.unlink()
    listed = {e.run_id: e for e in store.list_runs()}
    assert "not valid JSON" in listed["r0"].problem
    assert listed["r1"].problem is None
    assert [p.run_id for p in store.series("dep", "t")] == ["r1", "r2"]


def test_an_older_index_is_migrated_and_keeps_its_pins(store):
    with sqlite3.connect(store.layout.index) as conn:  # an older layout: fewer tables
        conn.execute("DROP TABLE run_tasks")
        conn.execute("DROP TABLE task_results")
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    assert [e.run_id for e in store.list_runs()] == ["r2", "r1", "r0"]
    assert len(store.series("dep", "t")) == 3
    assert store.golden("dep").run_id == "r1"
    with sqlite3.connect(store.layout.index) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    assert version == (str(INDEX_SCHEMA_VERSION),)


def test_a_newer_index_is_refused(store):
    with sqlite3.connect(store.layout.index) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(UserError, match="schema_version 99 is newer than this suite reads"):
        store.list_runs()
    with pytest.raises(UserError, match="index.sqlite: schema_version 99"):
        store.record_run(store.root.parent / "runs" / "r0")


def test_a_newer_manifest_is_refused(store):
    path = store.layout.manifest("r0")
    manifest = json.loads(path.read_text())
    manifest["schema_version"] = 7
    path.write_text(json.dumps(manifest))
    with pytest.raises(UserError, match=f"{path}: schema_version 7 is newer"):
        store.get("r0")


def test_a_database_that_is_not_an_index_is_refused(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    with sqlite3.connect(root / "index.sqlite") as conn:
        conn.execute("CREATE TABLE something (x)")
    with pytest.raises(UserError, match="no `meta` table; not a run-store index"):
        RunStore(root).list_runs()
