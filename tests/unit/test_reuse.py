"""Baseline reuse through the run store: a hit copies a stored task's results into the new
arm; a changed version string or engine argument is a miss."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synthetic_runs import PlantedTask, write_synthetic_run  # noqa: E402

from evals.plan.arm_spec import ArmSpec  # noqa: E402
from evals.dispatch.reuse import reuse_finished_tasks  # noqa: E402
from evals.runner.layout import ArmLayout  # noqa: E402
from evals.pair.samples import read_output_dir  # noqa: E402
from evals.store import RunStore  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_run"
TASK = "tiny_reviews_gen"


def _spec(output_dir: Path, **changes) -> ArmSpec:
    spec = ArmSpec(arm="baseline", model="/models/tiny-reviews", engine={"dtype": "bfloat16"},
                   env={}, tasks=(TASK,), limit=30, num_fewshot=None, seed=1234,
                   include_paths=(), output_dir=str(output_dir),
                   versions={"vllm": "0.32.0+cpu", "lm-eval": "0.4.13"}, model_hash="abc")
    return replace(spec, **changes)


def _stored_run(tmp_path: Path, store: RunStore) -> ArmSpec:
    run_dir = write_synthetic_run(tmp_path / "run1", run_id="run1", created="2026-11-01T00:00:00",
                                  tasks=[PlantedTask(TASK, 30, 1, 1)],
                                  rng=np.random.default_rng(0))
    spec = _spec(run_dir / "arms" / "baseline")
    layout = ArmLayout(Path(spec.output_dir))
    shutil.copytree(FIXTURE, layout.lm_eval_dir)
    layout.mark_task_done(TASK, {"task": TASK, "key": spec.key_for(TASK), "wall_seconds": 3.0})
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    summary["arms"]["baseline"]["tasks"] = {TASK: layout.task_record(TASK)}
    summary["arms"]["candidate"]["tasks"] = {}
    summary_path.write_text(json.dumps(summary), encoding="utf-8")
    store.record_run(run_dir)
    return spec


def test_a_hit_copies_the_stored_results_and_says_where_from(tmp_path):
    store = RunStore(tmp_path / "store")
    source = _stored_run(tmp_path, store)
    target = _spec(tmp_path / "run2" / "arms" / "baseline")
    reused = reuse_finished_tasks(target, store.find_task_result)
    assert reused == {TASK: source.output_dir}
    layout = ArmLayout(Path(target.output_dir))
    assert layout.task_done(TASK, target.key_for(TASK))
    assert layout.task_record(TASK)["reused_from"] == source.output_dir
    copied = read_output_dir(layout.lm_eval_dir, [TASK])
    original = read_output_dir(Path(source.output_dir) / "lm_eval", [TASK])
    assert copied.records == original.records and len(copied.records) == 30
    assert reuse_finished_tasks(target, store.find_task_result) == {}  # already there


def test_a_changed_version_or_engine_argument_misses(tmp_path):
    store = RunStore(tmp_path / "store")
    source = _stored_run(tmp_path, store)
    newer = _spec(tmp_path / "run3" / "arms" / "baseline",
                  versions={**source.versions, "vllm": "0.33.0+cpu"})
    other = _spec(tmp_path / "run4" / "arms" / "baseline",
                  engine={"dtype": "bfloat16", "max_num_seqs": 64})
    for spec in (newer, other):
        assert spec.key_for(TASK) != source.key_for(TASK)
        assert reuse_finished_tasks(spec, store.find_task_result) == {}
        assert not ArmLayout(Path(spec.output_dir)).task_marker(TASK).exists()
