"""A kill-and-resume loop over run-store writes: a process records runs over and over and
is killed with SIGKILL at random moments, 30 times; after every kill each recorded run is
still readable (index, manifest and items), and a new writer carries on. The count is in
docs/reliability.md."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from synthetic_runs import FIXTURE

from evals.store import RunStore

KILLS = 30
RUNS = 4
WRITER = """
import sys
from pathlib import Path
from evals.store import RunStore
store = RunStore(Path(sys.argv[1]))
dirs = [Path(p) for p in sys.argv[2:]]
import evals.record.run_record, evals.store._manifest_builder  # noqa: the imports are not the test
print("ready", flush=True)
while True:
    for run_dir in dirs:
        store.record_run(run_dir)
"""


def _run_dirs(tmp_path: Path) -> list[Path]:
    dirs = []
    for i in range(RUNS):
        target = tmp_path / f"run-{i}"
        shutil.copytree(FIXTURE, target)
        summary = json.loads((target / "summary.json").read_text())
        summary["run_id"] = f"kill-loop-{i}"
        (target / "summary.json").write_text(json.dumps(summary))
        dirs.append(target)
    return dirs


def test_thirty_kill_9s_mid_write_leave_every_run_readable(tmp_path):
    dirs = _run_dirs(tmp_path)
    store_dir = tmp_path / "store"
    RunStore(store_dir).record_run(dirs[0])
    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for kill in range(KILLS):
        order = dirs[kill % RUNS:] + dirs[:kill % RUNS]
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store_dir),
                                   *map(str, order)], stdout=subprocess.PIPE, env=env)
        assert writer.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.02, 0.6))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        store = RunStore(store_dir)
        entries = store.list_runs(limit=100, verify=True)
        assert entries, f"after kill {kill + 1} nothing is listed"
        for entry in entries:
            assert entry.problem is None, (kill + 1, entry.run_id, entry.problem)
            stored = store.get(entry.run_id)
            assert stored.manifest and store.items(entry.run_id).num_rows > 0
    # the writers did write between the kills: every run got recorded
    assert {e.run_id for e in RunStore(store_dir).list_runs(limit=100)} == \
        {f"kill-loop-{i}" for i in range(RUNS)}
