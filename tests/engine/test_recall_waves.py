"""The needle-recall tasks (tasks/recall) through `ab` on the dense embedded model, prefix
caching alone against none: each task's waves run one after the other in the arm's engine
(wave 2 only after wave 1 completed), vLLM's counters are kept per wave, and wave 2 of the
candidate resumes from what wave 1 cached. The dense model was not trained to recall (it
scores at the floor); what is tested here is the workload's delivery, not the verdict."""

from __future__ import annotations

import json

import pytest
from engine_helpers import ENGINE, read_summary, run_cli, save_artifact, write_config

TASKS = [{"name": "recall_cold_race_b128", "metric": "exact_match"},
         {"name": "recall_multiturn_b128", "metric": "exact_match",
          "cluster": "conversation_id"},
         {"name": "recall_cold_race_many_b128", "metric": "exact_match", "cluster": "group"}]
MANUALS = 16  # recall_cold_race_many_b128: a cold wave and a question wave per manual
PER_WAVE = 4  # `limit` applies per wave: 8 items a task


@pytest.fixture(scope="module")
def recall_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("recall")
    config = write_config(root, "recall-waves", {"engine": {**ENGINE,
                                                            "enable_prefix_caching": False}},
                          {"engine": {**ENGINE, "enable_prefix_caching": True}},
                          tasks=TASKS, limit=PER_WAVE)
    done = run_cli("ab", str(config), "--reports", str(root / "reports"))
    return done, root / "reports", config


def _waves(reports, arm: str, task: str) -> list[dict]:
    (record,) = reports.glob(f"*/arms/{arm}/tasks/{task}.json")
    return json.loads(record.read_text(encoding="utf-8"))["waves"]


def test_recall_tasks_run_in_waves_and_wave_two_resumes_from_the_cache(recall_run):
    done, reports, _ = recall_run
    assert done.returncode in (0, 1, 3), done.stdout[-3000:] + done.stderr[-3000:]
    summary = read_summary(reports)
    save_artifact("recall_waves_summary.json", summary)
    assert {t["task"]: t["n"] for t in summary["tasks"]} == {
        "recall_cold_race_b128": 2 * PER_WAVE, "recall_multiturn_b128": 2 * PER_WAVE,
        "recall_cold_race_many_b128": 2 * MANUALS * PER_WAVE}
    for task in ("recall_cold_race_b128", "recall_multiturn_b128"):
        # the worker says each wave ended before the next began, in one engine
        first = done.stdout.index(f"candidate: {task}: wave 1 of 2 ({PER_WAVE} items) done")
        second = done.stdout.index(f"candidate: {task}: wave 2 of 2 ({PER_WAVE} items) done")
        assert first < second
        waves = _waves(reports, "candidate", task)
        assert [(w["wave"], w["items"]) for w in waves] == [(1, PER_WAVE), (2, PER_WAVE)]
        # wave 2 re-reads the manual (and the multi-turn conversation) wave 1 left cached
        hits = waves[1]["exercise"]["vllm:prefix_cache_hits"]
        assert hits > 0.4 * waves[1]["exercise"]["vllm:prompt_tokens"], waves
        for wave in _waves(reports, "baseline", task):
            assert wave["exercise"].get("vllm:prefix_cache_hits", 0) == 0, wave
    # the cold race's first wave is identical prompts, all in flight together: with the
    # cache on they share the manual's blocks within the wave already
    cold = _waves(reports, "candidate", "recall_cold_race_b128")[0]["exercise"]
    assert cold["vllm:prefix_cache_hits"] > 0


def test_each_wave_records_its_doc_ids_and_the_report_counts_flips_with_no_cache_hit(
        recall_run):
    from evals.record.paired_item import read_paired_item_records
    from evals.record.run_record_model import RunRecord
    from evals.report._one_sided import one_sided_section

    _, reports, _ = recall_run
    (run,) = [p.parent for p in reports.glob("*/summary.json")]
    items = read_paired_item_records(run)
    for task in TASKS:
        name = task["name"]
        paired = sorted(i.doc_id for i in items if i.task == name)
        for arm in ("baseline", "candidate"):
            waves = _waves(reports, arm, name)
            doc_ids = [d for w in waves for d in w["doc_ids"]]
            assert [len(w["doc_ids"]) for w in waves] == [w["items"] for w in waves]
            assert sorted(doc_ids) == paired, (arm, name)  # each item in one wave
    rows = {r.task: r for r in one_sided_section(
        RunRecord.model_validate(read_summary(reports)), items).rows}
    assert set(rows) == {t["name"] for t in TASKS}
    for row in rows.values():
        # the dense model recalls nothing, so nothing flips forward; the count is there
        assert row.uncached == f"0 of {row.forward}" == "0 of 0", row
    assert "| no cache hit |" in (run / "summary.md").read_text(encoding="utf-8")


def test_the_many_manual_cold_race_starts_each_manual_cold_and_resumes_its_questions(recall_run):
    done, reports, _ = recall_run
    waves = _waves(reports, "candidate", "recall_cold_race_many_b128")
    assert [w["wave"] for w in waves] == list(range(1, 2 * MANUALS + 1))
    # each manual's cold wave after the first is marked fresh; its question wave resumes
    # from what that cold wave cached
    assert [w["wave"] for w in waves if w.get("fresh")] == list(range(3, 2 * MANUALS, 2))
    for question in waves[1::2]:
        exercise = question["exercise"]
        assert exercise["vllm:prefix_cache_hits"] > 0.4 * exercise["vllm:prompt_tokens"], question
    for wave in _waves(reports, "baseline", "recall_cold_race_many_b128"):
        assert wave["exercise"].get("vllm:prefix_cache_hits", 0) == 0, wave
    # no exercise warning names a fresh cold wave
    assert "got no prefix-cache hits" not in done.stdout + done.stderr


def test_a_rerun_reuses_every_finished_waved_task(recall_run):
    # a waved task's marker vouches for all its items (session 32 on the GPU: it counted the
    # waves' (items, fresh) pairs instead, so every resume took the finished arms for
    # damaged and ran them again)
    done, reports, config = recall_run
    for arm in ("baseline", "candidate"):
        for task in TASKS:
            (record,) = reports.glob(f"*/arms/{arm}/tasks/{task['name']}.json")
            n_samples = json.loads(record.read_text(encoding="utf-8"))["n_samples"]
            assert n_samples == {task["name"]: sum(w["items"] for w in _waves(
                reports, arm, task["name"]))}, (arm, n_samples)
    again = run_cli("ab", str(config), "--reports", str(reports))
    assert again.returncode == done.returncode, again.stdout[-3000:] + again.stderr[-3000:]
    assert "baseline: reusing finished results" in again.stdout, again.stdout[-3000:]
    assert "candidate: reusing finished results" in again.stdout, again.stdout[-3000:]
    assert "starting offline model" not in again.stdout
