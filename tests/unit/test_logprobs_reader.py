"""Reading an arm's per-token log-probabilities (evals.pair.logprobs) and the shift
analysis's bad input (evals.analyse.shift)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evals.analyse.shift import analyse_shift, check_top_k
from evals.decide.verdict import RunVerdict, Verdict, apply_shift_gate
from evals.errors import UserError
from evals.pair.logprobs import Generation, TaskLogprobs, read_task_logprobs
from evals.pair.pairing import PairedTask
from evals.runner.logprob_capture import write_rows

ROW = {"tokens": [3, 4], "top": [[[3, -0.1], [9, -2.5]], [[4, -0.01], [3, -5.0]]]}


def test_rows_written_and_appended_are_read_back_last_row_winning(tmp_path):
    path = tmp_path / "t.jsonl"
    write_rows(path, "t", 2, {0: ROW, 1: ROW}, append=False)
    write_rows(path, "t", 2, {1: {"tokens": [4], "top": [[[4, -0.2], [5, -1.9]]]}}, append=True)
    read = read_task_logprobs(path)
    assert read.task == "t" and read.top_k == 2 and sorted(read.items) == [0, 1]
    assert read.items[0] == Generation((3, 4), ({3: -0.1, 9: -2.5}, {4: -0.01, 3: -5.0}))
    assert read.items[1].tokens == (4,)


def test_a_last_line_cut_short_by_a_crash_is_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    write_rows(path, "t", 2, {0: ROW}, append=False)
    with path.open("a") as handle:
        handle.write('{"doc_id": 1, "tokens": [3')
    assert sorted(read_task_logprobs(path).items) == [0]


@pytest.mark.parametrize("line, message", [
    ('{"doc_id": 1, "tokens": [3], "top": []}', "line 3: malformed logprobs row"),
    ('{"doc_id": 1, "tokens": [3], "top": [[[3, 0.7]]]}', "line 3: malformed logprobs row"),
    ("not json", "line 3: malformed logprobs row"),
])
def test_a_bad_row_names_its_line(tmp_path, line, message):
    path = tmp_path / "t.jsonl"
    write_rows(path, "t", 2, {0: ROW}, append=False)
    with path.open("a") as handle:
        handle.write(line + "\n" + json.dumps({"doc_id": 2, **ROW}) + "\n")
    with pytest.raises(UserError, match=message):
        read_task_logprobs(path)


def test_a_file_without_its_header_is_bad_input(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"doc_id": 0, **ROW}) + "\n")
    with pytest.raises(UserError, match="not a logprobs file"):
        read_task_logprobs(path)


def test_arms_with_different_top_k_are_bad_input_naming_them():
    a, b = TaskLogprobs("t", 5, {}), TaskLogprobs("t", 3, {})
    with pytest.raises(UserError, match="baseline top_k=5, candidate top_k=3"):
        check_top_k("t", {"baseline": a, "candidate": b, "rerun": None})


def test_without_logprobs_a_generation_task_says_why():
    p = PairedTask(task="t", metric="exact_match", filter="none", doc_ids=(0,),
                   baseline=np.array([1.0]), candidate=np.array([1.0]),
                   baseline_records=(), candidate_records=())
    why = analyse_shift(p, seed_rng=np.random.default_rng(0), margin=5e-5)
    assert isinstance(why, str) and "logprobs: k" in why


def test_the_fail_gate_turns_only_a_pass_into_a_regression():
    passed = RunVerdict(Verdict.PASS, (), 0.05, 0.03, "holm", "every gated task is non-inferior")
    after = apply_shift_gate(passed, [("t", 1e-4)])
    assert after.verdict is Verdict.REGRESSION and "t (Holm p=0.0001)" in after.reason
    assert apply_shift_gate(passed, []) == passed
    unsure = RunVerdict(Verdict.INCONCLUSIVE, (), 0.05, 0.03, "holm", "x")
    assert apply_shift_gate(unsure, [("t", 1e-4)]) == unsure
