"""Reuse through the run store: a hit copies a stored task's results into the new arm; a
changed version string or engine argument is a miss; replicates are reused only from the
same replicate of one earlier run; a finished task with a damaged samples file is not
trusted."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synthetic_runs import PlantedTask, write_synthetic_run  # noqa: E402

from evals.plan.arm_spec import ArmSpec  # noqa: E402
from evals.dispatch.reuse import reuse_finished_tasks  # noqa: E402
from evals.errors import UserError  # noqa: E402
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
    reused = reuse_finished_tasks([target], store.task_result_sources)
    assert reused["baseline"][TASK]["reused_from"] == source.output_dir
    layout = ArmLayout(Path(target.output_dir))
    assert layout.task_done(TASK, target.key_for(TASK))
    record = layout.task_record(TASK)
    assert record["reused_from"] == source.output_dir and record["reused_run"] == "run1"
    assert record["ran_in"] == source.output_dir
    assert record["reuse_reason"].startswith(f"same content key {target.key_for(TASK)}")
    copied = read_output_dir(layout.lm_eval_dir, [TASK])
    original = read_output_dir(Path(source.output_dir) / "lm_eval", [TASK])
    assert copied.records == original.records and len(copied.records) == 30
    assert reuse_finished_tasks([target], store.task_result_sources) == {}  # already there


def test_a_changed_version_or_engine_argument_misses(tmp_path):
    store = RunStore(tmp_path / "store")
    source = _stored_run(tmp_path, store)
    newer = _spec(tmp_path / "run3" / "arms" / "baseline",
                  versions={**source.versions, "vllm": "0.33.0+cpu"})
    other = _spec(tmp_path / "run4" / "arms" / "baseline",
                  engine={"dtype": "bfloat16", "max_num_seqs": 64})
    for spec in (newer, other):
        assert spec.key_for(TASK) != source.key_for(TASK)
        assert reuse_finished_tasks([spec], store.task_result_sources) == {}
        assert not ArmLayout(Path(spec.output_dir)).task_marker(TASK).exists()


def _recorded(tmp_path: Path, store: RunStore, run_id: str, created: str,
              arms: dict[str, int]) -> dict[str, ArmSpec]:
    """A recorded run whose arms (name -> replicate) finished TASK, each with the fixture's
    samples and a marker that records their counts."""
    run_dir = write_synthetic_run(tmp_path / run_id, run_id=run_id, created=created,
                                  tasks=[PlantedTask(TASK, 30, 1, 1)],
                                  rng=np.random.default_rng(0))
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    specs = {}
    for arm, replicate in arms.items():
        spec = _spec(run_dir / "arms" / arm, arm=arm, replicate=replicate)
        layout = ArmLayout(Path(spec.output_dir))
        shutil.copytree(FIXTURE, layout.lm_eval_dir)
        layout.mark_task_done(TASK, {"task": TASK, "key": spec.key_for(TASK),
                                     "n_samples": {TASK: 30}})
        summary["arms"].setdefault(arm, dict(summary["arms"]["baseline"]))
        summary["arms"][arm]["tasks"] = {TASK: layout.task_record(TASK)}
        specs[arm] = spec
    for arm in set(summary["arms"]) - set(arms):
        summary["arms"][arm]["tasks"] = {}
    summary_path.write_text(json.dumps(summary), encoding="utf-8")
    store.record_run(run_dir)
    return specs


def _aa_targets(run_dir: Path) -> list[ArmSpec]:
    """An A/A + noise floor: three arms of one config, numbered as evals.dispatch.arms does."""
    from evals.dispatch.arms import number_replicates

    specs = {arm: _spec(run_dir / "arms" / arm, arm=arm)
             for arm in ("baseline", "candidate", "baseline_rerun")}
    return list(number_replicates(specs).values())


def test_replicates_of_one_config_are_numbered_and_keyed_apart(tmp_path):
    base, cand, rerun = _aa_targets(tmp_path)
    assert (base.replicate, cand.replicate, rerun.replicate) == (0, 1, 2)
    assert len({s.key_for(TASK) for s in (base, cand, rerun)}) == 3
    # a candidate with another config is replicate 0 of its own config
    from evals.dispatch.arms import number_replicates

    other = number_replicates({"baseline": base, "candidate": _spec(
        tmp_path / "c", arm="candidate", engine={"dtype": "float32"})})
    assert other["candidate"].replicate == 0


def test_each_replicate_is_reused_from_its_own_replicate_of_one_earlier_run(tmp_path):
    store = RunStore(tmp_path / "store")
    _recorded(tmp_path, store, "aa1", "2026-11-01T00:00:00",
              {"baseline": 0, "candidate": 1, "baseline_rerun": 2})
    # a later run holds replicate 0 only: the set still comes from aa1, which holds all
    _recorded(tmp_path, store, "plain", "2026-11-02T00:00:00", {"baseline": 0})
    targets = _aa_targets(tmp_path / "aa2")
    reused = reuse_finished_tasks(targets, store.task_result_sources)
    assert {arm: r[TASK]["reused_from"] for arm, r in reused.items()} == {
        arm: str(tmp_path / "aa1" / "arms" / arm)
        for arm in ("baseline", "candidate", "baseline_rerun")}
    assert {r[TASK]["reused_run"] for r in reused.values()} == {"aa1"}


def test_a_replicate_is_never_reused_from_another_replicate(tmp_path):
    store = RunStore(tmp_path / "store")
    _recorded(tmp_path, store, "plain", "2026-11-02T00:00:00", {"baseline": 0})
    targets = _aa_targets(tmp_path / "aa")
    reused = reuse_finished_tasks(targets, store.task_result_sources)
    assert list(reused) == ["baseline"]  # the candidate and the rerun must run
    assert not ArmLayout(Path(targets[1].output_dir)).task_marker(TASK).exists()


def test_a_damaged_samples_file_is_neither_trusted_nor_reused(tmp_path):
    store = RunStore(tmp_path / "store")
    (source,) = _recorded(tmp_path, store, "run1", "2026-11-01T00:00:00",
                          {"baseline": 0}).values()
    layout = ArmLayout(Path(source.output_dir))
    assert layout.task_done(TASK, source.key_for(TASK))
    (samples,) = layout.lm_eval_dir.rglob(f"samples_{TASK}_*.jsonl")
    data = samples.read_bytes()
    samples.write_bytes(data[:len(data) // 2])  # cut mid-line
    assert not layout.task_done(TASK, source.key_for(TASK))
    assert "ends in the middle of a line" in layout.damaged_output(layout.task_record(TASK))
    samples.write_bytes(b"".join(data.splitlines(keepends=True)[:20]))  # whole lines lost
    assert "holds 20 of the 30 samples recorded" in layout.damaged_output(
        layout.task_record(TASK))
    target = _spec(tmp_path / "run2" / "arms" / "baseline")
    assert reuse_finished_tasks([target], store.task_result_sources) == {}


def test_a_damaged_finished_task_loses_its_marker_with_a_message(tmp_path):
    from evals.dispatch.arms import forget_damaged

    store = RunStore(tmp_path / "store")
    spec = _recorded(tmp_path, store, "run1", "2026-11-01T00:00:00", {"baseline": 0})["baseline"]
    layout = ArmLayout(Path(spec.output_dir))
    (samples,) = layout.lm_eval_dir.rglob(f"samples_{TASK}_*.jsonl")
    samples.write_bytes(samples.read_bytes()[:-10])
    lines: list[str] = []
    forget_damaged({"baseline": spec}, lines.append)
    assert not layout.task_marker(TASK).exists()
    (line,) = lines
    assert str(samples) in line and "runs again" in line


def test_a_comparison_whose_replicates_are_one_engine_run_is_refused(tmp_path):
    """The noise floor and the shift test need two engine runs: arms whose task results
    came from one stored arm stop the analysis with a sentence, not zero noise."""
    from evals.analyse.comparison_analysis import pair_and_analyse
    from evals.plan.config import GateConfig, TaskSpec

    samples = read_output_dir(FIXTURE, [TASK])
    arms = {arm: {"tasks": {TASK: {"outcome": "reused", "ran_in": "/runs/r1/arms/baseline"}}}
            for arm in ("baseline", "baseline_rerun")}
    arms["candidate"] = {"tasks": {TASK: {"outcome": "ran", "ran_in": "/runs/r2/arms/c"}}}
    spec = TaskSpec(name=TASK, metric="exact_match")
    run = tmp_path / "r2"
    with pytest.raises(UserError, match=r"baseline and baseline_rerun are both "
                                        r"/runs/r1/arms/baseline: one engine run"):
        pair_and_analyse(run, [spec], GateConfig(), 1, {a: samples for a in arms},
                         manifests=arms)
    arms["baseline_rerun"]["tasks"][TASK]["ran_in"] = "/runs/r1/arms/baseline_rerun"
    analysed = pair_and_analyse(run, [spec], GateConfig(), 1, {a: samples for a in arms},
                                manifests=arms)
    assert analysed.analyses[0].task == TASK
