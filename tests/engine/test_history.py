"""Run history on real engines: baseline reuse (a hit, and a miss when an engine argument
changes), a pinned golden run, and a drift run against it; `runs` and `history`."""

from __future__ import annotations

import json

from engine_helpers import ENGINE, LIMIT, read_summary, run_cli, write_config

TASKS = [{"name": "tiny_addition", "metric": "exact_match"}]
BASE = {"engine": {**ENGINE, "enable_prefix_caching": False}}
CAND = {"engine": {**ENGINE, "enable_prefix_caching": True}}


def _items(run_dir) -> list[tuple]:
    lines = (run_dir / "paired_items.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    rows = [json.loads(x) for x in lines]
    return sorted((r["task"], r["doc_id"], r["baseline"], r["candidate"]) for r in rows)


def test_reuse_pin_and_drift(tmp_path, shared_store):
    """In the session's store: the first run's baseline may already come from an earlier
    test (the same plain engine on tiny_addition); everything after is this test's."""
    store = str(shared_store)
    first = write_config(tmp_path, "deploy", BASE, CAND, tasks=TASKS)
    r1 = run_cli("ab", str(first), "--reports", str(tmp_path / "r1"), "--store", store)
    assert r1.returncode in (0, 1, 3), r1.stdout + r1.stderr
    run1 = next((tmp_path / "r1").glob("deploy-*"))

    # the same arms under another name: both arms come from the store, no engine starts
    copy = write_config(tmp_path, "deploy-copy", BASE, CAND, tasks=TASKS)
    r2 = run_cli("ab", str(copy), "--reports", str(tmp_path / "r2"), "--store", store)
    assert r2.returncode == r1.returncode, r2.stdout + r2.stderr
    assert "baseline: tiny_addition reused from" in r2.stdout
    assert "candidate: tiny_addition reused from" in r2.stdout
    assert "starting" not in r2.stdout
    run2 = next((tmp_path / "r2").glob("deploy-copy-*"))
    assert _items(run2) == _items(run1)
    summary2 = read_summary(tmp_path / "r2")
    assert summary2["arms"]["candidate"]["tasks"]["tiny_addition"]["reused_from"] == \
        str(run1 / "arms" / "candidate")

    # one engine argument changed: the candidate misses and runs; the baseline still hits
    miss = write_config(tmp_path, "deploy-miss", BASE,
                        {"engine": {**CAND["engine"], "max_num_seqs": 64}}, tasks=TASKS,
)
    r3 = run_cli("ab", str(miss), "--reports", str(tmp_path / "r3"), "--store", store)
    assert r3.returncode in (0, 1, 3), r3.stdout + r3.stderr
    assert "baseline: tiny_addition reused from" in r3.stdout
    assert "candidate: tiny_addition reused" not in r3.stdout
    assert "candidate: starting" in r3.stdout

    # drift: no golden yet is bad input; pin the first run, then the drift run compares
    no_golden = run_cli("drift", str(first), "--reports", str(tmp_path / "d"), "--store", store)
    assert no_golden.returncode == 2 and "has no golden run" in no_golden.stderr
    pinned = run_cli("pin", run1.name, "--deployment", "deploy", "--store", store)
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    drift = run_cli("drift", str(first), "--reports", str(tmp_path / "d"), "--store", store)
    assert drift.returncode in (0, 3), drift.stdout + drift.stderr
    summary = read_summary(tmp_path / "d")
    assert summary["kind"] == "drift" and summary["drift"]["golden_run"] == run1.name
    (task,) = summary["tasks"]
    assert task["n"] == LIMIT
    listed = run_cli("runs", "--store", store)
    assert listed.returncode == 0
    assert run1.name in listed.stdout and "(golden)" in listed.stdout
    assert summary["run_id"] in listed.stdout
    page = tmp_path / "history.html"
    hist = run_cli("history", "--deployment", "deploy", "--store", store, "--out", str(page))
    assert hist.returncode == 0, hist.stdout + hist.stderr
    assert "tiny_addition" in page.read_text(encoding="utf-8")
