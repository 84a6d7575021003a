"""Each typed part of a task's record (evals.record.task_parts) holds what the analysis
found: a sampled task's repeats and answer-distribution check, and a sequential task's
looks, built by the pipeline's builder, written, read back through the one reader and
rendered; and every field of every record model has a type without `Any` and a
description."""

from __future__ import annotations

import json
import typing
from dataclasses import replace

import numpy as np
from pydantic import BaseModel

from evals.analyse.early_stop import SequentialSummary
from evals.analyse.repeats_analysis import analyse_repeats
from evals.decide.verdict import decide
from evals.pair.pairing import PairedTask
from evals.pair.repeats import RepeatScores, pair_repeats
from evals.record.arm_record import ArmRecord
from evals.record.canary_record import CanaryRecord
from evals.record.preflight_record import PreflightRecord
from evals.record.run_record import build_summary, migrate_summary
from evals.record.run_record_model import RunRecord
from evals.record.shift_record import ShiftRecord
from evals.record.study_record import StudyRecord
from evals.record.task_parts import (AnswerDistributionRecord, LabelsRecord, RepeatsRecord,
                                     SequentialRecord)
from evals.report.terminal_table import render_table


def _scores(source: str, answers: dict[int, list[str]]) -> RepeatScores:
    items = {d: {"doc_id": d, "responses": [" " + a for a in ans],
                 "answers": {"strip": list(ans)},
                 "scores": {"strip": {"exact_match": [float(a == "7") for a in ans]}}}
             for d, ans in answers.items()}
    return RepeatScores(source, "t", len(next(iter(answers.values()))), items)


def _sampled_analysis():
    n, k = 40, 4
    rng = np.random.default_rng(2)
    base = {d: ["7" if rng.random() < 0.9 else "1" for _ in range(k)] for d in range(n)}
    cand = {d: ["7" if rng.random() < 0.3 else "5" for _ in range(k)] for d in range(n)}
    paired = PairedTask(task="t", metric="exact_match", filter="strip",
                        doc_ids=tuple(range(n)), baseline=np.zeros(n), candidate=np.zeros(n),
                        baseline_records=(), candidate_records=())
    reps = pair_repeats(paired, _scores("b", base), _scores("c", cand), "run")
    return analyse_repeats(paired, reps, gated=True, alpha=0.05, margin=0.05, seed=3,
                           n_resamples=1000)


def test_a_sampled_and_sequential_task_reads_back_as_typed_parts(tmp_path):
    looks = SequentialSummary(decision="regression", items_used=40, n_items=120, chunk=20,
                              looks=2, alpha=0.05, threshold=20.0,
                              log_evalue_regression=4.5, log_evalue_noninferiority=-1.0)
    analysis = replace(_sampled_analysis(), sequential=looks)
    record = build_summary(kind="ab", run_id="r", config={"name": "r", "seed": 1},
                           analyses=[analysis], verdict=decide([analysis], alpha=0.05,
                                                               margin=0.05),
                           arms={}, sources={}, warnings=[])
    stored = json.loads(json.dumps(record.model_dump()))
    (task,) = migrate_summary(stored, tmp_path / "summary.json").tasks
    assert isinstance(task.repeats, RepeatsRecord)
    assert (task.repeats.repeats, task.repeats.method, task.repeats.items_dropped) == \
        (analysis.repeats.repeats, analysis.repeats.method, analysis.repeats.items_dropped)
    assert isinstance(task.answer_distribution, AnswerDistributionRecord)
    check = analysis.answer_distribution
    assert task.answer_distribution.changed is check.changed is True
    assert task.answer_distribution.pvalue == check.pvalue
    assert [i.doc_id for i in task.answer_distribution.top_items] == \
        [i["doc_id"] for i in check.top_items]
    assert [i.candidate for i in task.answer_distribution.top_items] == \
        [i["candidate"] for i in check.top_items]
    assert isinstance(task.sequential, SequentialRecord)
    assert (task.sequential.n_items, task.sequential.decision) == (120, "regression")
    assert f"{task.n}/120" in render_table(record)


def _models_under(model: type[BaseModel], seen: set) -> None:
    if model in seen:
        return
    seen.add(model)
    for field in model.model_fields.values():
        stack = [field.annotation]
        while stack:
            tp = stack.pop()
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                _models_under(tp, seen)
            stack.extend(typing.get_args(tp))


def test_every_field_of_every_record_model_is_typed_and_described():
    seen: set = set()
    for record in (RunRecord, StudyRecord, CanaryRecord):
        _models_under(record, seen)
    assert {ArmRecord, LabelsRecord, ShiftRecord, PreflightRecord} <= seen
    for model in seen:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            shown = repr(field.annotation)
            assert "Any" not in shown, f"{model.__name__}.{name}: {shown}"
