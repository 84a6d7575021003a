"""A crash while recording leaves the store's previous state readable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from synthetic_runs import FIXTURE

from evals.errors import UserError
from evals.store import RunStore
from evals.store import _run_store as run_store_module

REPO_ROOT = Path(__file__).resolve().parents[2]


class Crash(Exception):
    pass


@pytest.fixture
def recorded(tmp_path) -> tuple[RunStore, Path, dict]:
    """A store holding the real run; the run directory edited for a second, different record."""
    run = Path(shutil.copytree(FIXTURE, tmp_path / "runs" / FIXTURE.name))
    store = RunStore(tmp_path / "store")
    before = store.record_run(run)
    summary = json.loads((run / "summary.json").read_text())
    summary["verdict"] = "PASS"
    summary["tasks"][0]["delta"] = 0.5
    (run / "summary.json").write_text(json.dumps(summary))
    lines = (run / "paired_items.jsonl").read_text().splitlines()
    (run / "paired_items.jsonl").write_text("\n".join(lines[:11]) + "\n")  # 10 items
    return store, run, {"manifest": before.manifest, "rows": before.entry.n_items}


def assert_previous_state(store: RunStore, previous: dict) -> None:
    run_id = previous["manifest"]["run_id"]
    entry, = store.list_runs(verify=True)
    assert entry.problem is None and entry.verdict == "REGRESSION"
    assert store.get(run_id).manifest == previous["manifest"]
    assert store.items(run_id).num_rows == previous["rows"]
    point = store.series(entry.deployment, previous["manifest"]["tasks"][0]["task"])[0]
    assert point.delta == previous["manifest"]["tasks"][0]["delta"]


def test_crash_after_the_files_before_the_index_commit(recorded, monkeypatch):
    store, run, previous = recorded

    def crash(conn, manifest):
        raise Crash("killed before the index commit")

    monkeypatch.setattr(run_store_module.index, "upsert_run", crash)
    with pytest.raises(Crash):
        store.record_run(run)
    directory = store.layout.run_dir(previous["manifest"]["run_id"])
    assert (directory / "manifest.prev.json").exists()  # the new files are in place ...
    assert json.loads((directory / "manifest.json").read_text())["verdict"] == "PASS"
    assert_previous_state(store, previous)  # ... but the committed state is what reads
    monkeypatch.undo()
    stored = store.record_run(run)  # the next record rolls the leftovers back and succeeds
    assert stored.entry.verdict == "PASS" and stored.entry.n_items == 10
    assert not (directory / "manifest.prev.json").exists()


def test_crash_between_the_two_file_replacements(recorded, monkeypatch):
    store, run, previous = recorded

    def crash(path, manifest):
        raise Crash("killed after items.parquet was replaced")

    monkeypatch.setattr(run_store_module, "write_manifest", crash)
    with pytest.raises(Crash):
        store.record_run(run)
    assert_previous_state(store, previous)


def test_crash_in_the_middle_of_a_file_write(recorded, monkeypatch):
    store, run, previous = recorded
    real_replace = os.replace

    def replace_then_crash(src, dst):
        if str(dst).endswith("items.parquet"):
            raise Crash("killed before the rename")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_then_crash)
    with pytest.raises(Crash):
        store.record_run(run)
    monkeypatch.undo()
    assert_previous_state(store, previous)


def test_a_first_record_that_crashed_is_not_listed(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "store")

    def crash(conn, manifest):
        raise Crash("killed before the first commit")

    monkeypatch.setattr(run_store_module.index, "upsert_run", crash)
    with pytest.raises(Crash):
        store.record_run(FIXTURE)
    assert store.list_runs() == ()
    with pytest.raises(UserError, match="not in the store"):
        store.get("cpu-w4a16-870a75c5")
    monkeypatch.undo()
    assert store.record_run(FIXTURE).entry.verdict == "REGRESSION"


CRASHING_RECORD = textwrap.dedent("""
    import os, sys
    from evals.store import RunStore
    from evals.store import _run_store

    real_upsert = _run_store.index.upsert_run

    def upsert_then_die(conn, manifest):
        real_upsert(conn, manifest)  # the index rows are written but not committed
        os._exit(9)  # no exception handler, no finally: like a kill -9

    _run_store.index.upsert_run = upsert_then_die
    RunStore(sys.argv[1]).record_run(sys.argv[2])
""")


def test_a_killed_process_leaves_the_previous_state(recorded):
    store, run, previous = recorded
    result = subprocess.run([sys.executable, "-c", CRASHING_RECORD, str(store.root), str(run)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 9, result.stderr
    assert_previous_state(RunStore(store.root), previous)  # SQLite rolled its journal back
