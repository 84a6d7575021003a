"""The run store: recording real and synthetic runs, queries, golden pins, series, arm reuse."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats
from synthetic_runs import FIXTURE, PlantedTask, write_synthetic_run

from evals.errors import UserError
from evals.record.run_record import read_paired_items, read_summary
from evals.store import (INDEX_SCHEMA_VERSION, ITEMS_SCHEMA_VERSION, MANIFEST_SCHEMA_VERSION,
                         RunStore)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "store")


@pytest.fixture
def real_run(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "runs" / FIXTURE.name))


def synthetic(tmp_path, run_id, created, tasks, config_name="dep", seed=0):
    return write_synthetic_run(tmp_path / "runs" / run_id, run_id=run_id, created=created,
                               tasks=tasks, rng=np.random.default_rng(seed),
                               config_name=config_name)


def test_round_trip_of_the_recorded_real_run(store, real_run):
    summary = read_summary(real_run)
    stored = store.record_run(real_run)
    manifest = stored.manifest
    assert next(iter(json.loads(store.layout.manifest(stored.run_id).read_text()))) == \
        "schema_version"
    assert manifest["schema_version"] == MANIFEST_SCHEMA_VERSION
    assert manifest["run_id"] == summary["run_id"] == stored.entry.run_id
    assert manifest["config"] == summary["config"]
    assert manifest["verdict"] == stored.entry.verdict == "REGRESSION"
    for arm in ("baseline", "candidate"):
        assert manifest["arms"][arm]["effective_engine_config"] == \
            summary["arms"][arm]["effective_engine_config"]
        assert manifest["arms"][arm]["versions"]["vllm"] == "0.32.0+cpu"
        assert manifest["arms"][arm]["model_hash"] == summary["arms"][arm]["model_hash"]
        assert manifest["arms"][arm]["engine_start_seconds"] > 0
    deltas = {t["task"]: t["delta"] for t in manifest["task_stats"]}
    assert deltas == {t["task"]: t["delta"] for t in summary["tasks"]}
    assert stored.entry.deployment == "cpu-w4a16"  # the config's name
    assert stored.entry.kind == "ab"
    assert stored.entry.source_dir == str(real_run.resolve())

    table = store.items(stored.run_id)
    rows = read_paired_items(real_run)
    assert table.num_rows == len(rows) == stored.entry.n_items
    assert table.column("doc_id").to_pylist() == [r["doc_id"] for r in rows]
    assert table.column("candidate_prediction").to_pylist() == \
        [r["candidate_prediction"] for r in rows]
    assert table.column("change").to_pylist() == \
        [int(np.sign(r["candidate"] - r["baseline"])) for r in rows]
    assert not {"prompt", "baseline_response", "candidate_response"} & set(table.column_names)
    metadata = pq.read_schema(store.layout.items(stored.run_id)).metadata
    assert metadata[b"evals.items.schema_version"] == str(ITEMS_SCHEMA_VERSION).encode()
    with sqlite3.connect(store.layout.index) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == \
            (str(INDEX_SCHEMA_VERSION),)
    # the fixture keeps only some items per task; the manifest says so instead of hiding it
    assert any("held 106 of its 1200" in note for note in manifest["items"]["notes"])


def test_new_summary_fields_are_kept(store, real_run):
    summary = json.loads((real_run / "summary.json").read_text())
    summary["speed"] = {"tpot_speedup": 1.25, "note": "a part the store does not index"}
    (real_run / "summary.json").write_text(json.dumps(summary))
    assert store.record_run(real_run).manifest["summary_other"] == \
        {"speed": {"tpot_speedup": 1.25, "note": "a part the store does not index"}}


def test_standard_error_is_scipy_sem_of_the_item_differences(store, tmp_path):
    run = synthetic(tmp_path, "r1", "2026-01-01T00:00:00+00:00",
                    [PlantedTask("t", 500, 30, 12)])
    stored = store.record_run(run)
    table = store.items("r1")
    diff = np.asarray(table.column("candidate")) - np.asarray(table.column("baseline"))
    point, = store.series("dep", "t")
    assert point.standard_error == pytest.approx(float(stats.sem(diff)), rel=1e-12)
    assert point.delta == pytest.approx(-18 / 500)
    assert point.n == 500 and stored.entry.n_items == 500


def test_recording_a_run_imports_no_statistics(store, tmp_path):
    """`record` and every process that records a run (evals.store._manifest_builder) import
    no scipy, about a second each: with scipy unimportable the recorded standard error is
    the same as with it."""
    run = synthetic(tmp_path, "r1", "2026-01-01T00:00:00+00:00", [PlantedTask("t", 300, 20, 9)])
    code = ("import sys; sys.modules.update(scipy=None); from pathlib import Path; "
            "from evals.store import RunStore; store = RunStore(Path(sys.argv[1])); "
            "store.record_run(Path(sys.argv[2])); "
            "print(store.series('dep', 't')[0].standard_error)")
    blocked = subprocess.run([sys.executable, "-c", code, str(tmp_path / "blocked"), str(run)],
                             capture_output=True, text=True, cwd=REPO, timeout=300)
    assert blocked.returncode == 0, blocked.stderr[-2000:]
    store.record_run(run)
    (point,) = store.series("dep", "t")
    assert float(blocked.stdout) == point.standard_error > 0


def test_listing_order_limit_and_deployments(store, tmp_path):
    dates = ["2026-01-03T00:00:00+00:00", "2026-01-01T00:00:00+00:00",
             "2026-01-02T09:00:00+09:00"]  # stored in UTC: 2026-01-02T00:00
    for i, created in enumerate(dates):
        store.record_run(synthetic(tmp_path, f"r{i}", created, [PlantedTask("t", 100, 5, 5)]))
    store.record_run(synthetic(tmp_path, "other", "2026-01-05T00:00:00+00:00",
                               [PlantedTask("t", 100, 5, 5)]), deployment="prod", kind="weekly")
    assert [e.run_id for e in store.list_runs()] == ["other", "r0", "r2", "r1"]
    assert [e.run_id for e in store.list_runs(limit=2)] == ["other", "r0"]
    assert [e.run_id for e in store.list_runs(deployment="dep")] == ["r0", "r2", "r1"]
    assert store.list_runs(deployment="prod")[0].kind == "weekly"
    assert store.list_runs()[2].created == "2026-01-02T00:00:00+00:00"
    assert store.deployments() == ("dep", "prod")
    with pytest.raises(UserError, match="limit"):
        store.list_runs(limit=0)


def test_re_recording_replaces_the_run(store, real_run):
    first = store.record_run(real_run)
    summary = json.loads((real_run / "summary.json").read_text())
    summary["verdict"] = "PASS"
    (real_run / "summary.json").write_text(json.dumps(summary))
    second = store.record_run(real_run)
    assert second.manifest["generation"] != first.manifest["generation"]
    assert [e.verdict for e in store.list_runs()] == ["PASS"]
    assert sorted(p.name for p in second.directory.iterdir()) == ["items.parquet",
                                                                  "manifest.json"]


def test_pin_keeps_one_golden_run_per_deployment(store, tmp_path):
    for i in range(3):
        store.record_run(synthetic(tmp_path, f"r{i}", f"2026-01-0{i + 1}T00:00:00+00:00",
                                   [PlantedTask("t", 100, 5, 5)]))
    assert store.golden("dep") is None
    assert store.pin("r0", "dep").golden
    store.pin("r1", "dep")
    assert store.golden("dep").run_id == "r1"
    assert [e.run_id for e in store.list_runs() if e.golden] == ["r1"]
    assert [p.golden for p in store.series("dep", "t")] == [False, True, False]
    with pytest.raises(UserError, match="recorded for deployment 'dep', not 'prod'"):
        store.pin("r2", "prod")
    with pytest.raises(UserError, match="'nope' is not in the store"):
        store.pin("nope", "dep")
    store.record_run(tmp_path / "runs" / "r1")  # a pin survives re-recording ...
    assert store.golden("dep").run_id == "r1"
    store.record_run(tmp_path / "runs" / "r1", deployment="prod")  # ... but not a move
    assert store.golden("dep") is None and store.golden("prod") is None


def test_series_is_chronological_whatever_the_recording_order(store, tmp_path):
    plan = {"r3": ("2026-03-01", 10), "r1": ("2026-01-01", 0), "r2": ("2026-02-01", 4)}
    for run_id, (day, worse) in plan.items():
        store.record_run(synthetic(tmp_path, run_id, f"{day}T00:00:00+00:00",
                                   [PlantedTask("t", 200, 10 + worse, 10, noise_flips=3),
                                    PlantedTask("u", 100, 1, 1)]))
    series = store.series("dep", "t")
    assert [p.run_id for p in series] == ["r1", "r2", "r3"]
    assert [p.delta for p in series] == pytest.approx([0.0, -0.02, -0.05])
    assert all(p.noise_flips == 3 and p.noise_flip_rate == 0.015 for p in series)
    assert all(p.ci_low < p.delta < p.ci_high for p in series)
    assert store.tasks("dep") == ("t", "u")
    assert store.series("dep", "missing") == ()


def test_find_task_result_returns_an_existing_arm_directory(store, tmp_path):
    run = synthetic(tmp_path, "r1", "2026-01-01T00:00:00+00:00", [PlantedTask("t", 50, 1, 1)])
    summary = read_summary(run)
    key = summary["arms"]["candidate"]["tasks"]["t"]["key"]
    store.record_run(run)
    assert store.find_task_result(key) is None  # the arm directory does not exist
    (run / "arms" / "candidate").mkdir(parents=True)
    assert store.find_task_result(key) == run.resolve() / "arms" / "candidate"
    assert store.find_task_result("0" * 20) is None


def test_default_root_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EVALS_STORE", str(tmp_path / "elsewhere"))
    assert RunStore().root == tmp_path / "elsewhere"
    monkeypatch.delenv("EVALS_STORE")
    assert RunStore().root.parts[-2:] == ("reports", "store")


def test_reading_a_store_that_does_not_exist_creates_nothing(tmp_path):
    store = RunStore(tmp_path / "none")
    assert store.list_runs() == () and store.deployments() == ()
    assert store.golden("x") is None and store.find_task_result("k") is None
    with pytest.raises(UserError, match="not in the store"):
        store.get("r1")
    assert not (tmp_path / "none").exists()


def test_bad_run_directories_are_user_errors(store, tmp_path, real_run):
    with pytest.raises(UserError, match="no summary.json"):
        store.record_run(tmp_path)
    summary = json.loads((real_run / "summary.json").read_text())
    summary["run_id"] = "../escape"
    (real_run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(UserError, match="cannot name a store directory"):
        store.record_run(real_run)
    with pytest.raises(UserError, match="deployment must be a non-empty name"):
        store.record_run(FIXTURE, deployment=" ")
