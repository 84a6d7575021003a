"""View-model builders: diff spans, forest-plot geometry, speed, item selection."""

from __future__ import annotations

import math
import random

import pytest

from evals.report._arms import flatten, pair_table
from evals.report._flipped_items import (PROMPT_TAIL_CHARS, RESPONSE_CHARS, BETTER, WORSE,
                                         flipped_items)
from evals.report._forest_plot import forest_plot
from evals.report._speed import speed_change, speed_section
from evals.report._text_diff import diff_segments
from evals.record.run_record import read_summary
from evals.record.run_record_model import RunRecord


def _changed(segments) -> list[str]:
    return [s.text for s in segments if s.changed]


def test_diff_marks_whole_differing_words():
    a, b = diff_segments("The answer is 42.", "The answer is 1042.")
    assert _changed(a) == ["42"] and _changed(b) == ["1042"]


def test_diff_of_identical_texts_marks_nothing():
    a, b = diff_segments("same text", "same text")
    assert _changed(a) == [] and _changed(b) == []


def test_diff_pure_insertion():
    a, b = diff_segments("x y", "x new y")
    assert _changed(a) == [] and _changed(b) == ["new "]


def test_diff_falls_back_to_one_span_for_confetti():
    words_a = " ".join(f"a{i}" for i in range(100))
    words_b = " ".join(f"a{i}" if i % 2 else f"b{i}" for i in range(100))
    a, b = diff_segments(words_a, words_b)
    assert len(_changed(a)) == 1 and len(_changed(b)) == 1


@pytest.mark.parametrize("seed", range(5))
def test_diff_segments_reassemble_the_texts(seed):
    rng = random.Random(seed)
    alphabet = ["foo", "bar", " ", "\n", ".", "<b>", "ü", "42"]
    a = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
    b = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
    seg_a, seg_b = diff_segments(a, b)
    assert "".join(s.text for s in seg_a) == a and "".join(s.text for s in seg_b) == b


def test_forest_plot_geometry(regression_run):
    summary = read_summary(regression_run)
    plot = forest_plot(RunRecord.model_validate(summary))
    assert plot.plot_left <= plot.margin_x < plot.zero_x <= plot.plot_right
    for row, task in zip(plot.rows, summary["tasks"]):
        assert plot.plot_left <= row.x_low <= row.x_point <= row.x_high <= plot.plot_right
        assert row.label == task["task"]
    labels = [t.label for t in plot.ticks]
    assert "0" in labels and all(a.x < b.x for a, b in zip(plot.ticks, plot.ticks[1:]))


def test_forest_plot_tolerates_missing_intervals(regression_run):
    summary = read_summary(regression_run)
    summary["tasks"][0]["ci_low"] = math.nan
    summary["tasks"][0]["ci_high"] = None
    row = forest_plot(RunRecord.model_validate(summary)).rows[0]
    assert row.x_low is None and row.x_high is None and row.x_point is not None


def _arm(wall: float, tokens: int, items: int = 10) -> dict:
    return {"tasks": {"t": {"wall_seconds": wall, "generated_tokens": tokens,
                            "n_samples": {"t": items}}}}


def _record(parts: dict) -> RunRecord:
    """A run record holding `parts` and the keys every record has."""
    return RunRecord.model_validate({
        "kind": "ab", "run_id": "r", "created": "", "suite_version": "", "verdict": "PASS",
        "exit_code": 0, "reason": "", "gate": {"alpha": 0.05, "margin": 0.03,
                                               "correction": "holm"},
        "tasks": [], "arms": {}, "sources": {}, "config": {}, "warnings": [], **parts})


def test_speed_line_falls_back_to_wall_time_throughput():
    speed = speed_change(_record({"arms": {"baseline": _arm(100, 1000),
                                           "candidate": _arm(50, 1000)}}))
    assert speed.text == ("candidate 2.00x faster in generated tokens per second (candidate "
                          "20.0 vs baseline 10.0, over 1 task(s), task wall time)")
    assert speed_change(_record({"arms": {"baseline": _arm(10, 0),
                                          "candidate": _arm(20, 0)}})) is None


def test_speed_line_and_section_from_the_measured_speedup():
    arm = {"requests": 40, "ttft_p50": 0.0123, "ttft_p95": 0.05, "tpot_p50": 0.002,
           "tpot_p95": 0.004, "output_tokens_per_s": 310.0, "requests_per_s": 12.5,
           "acceptance_rate": None}
    summary = _record({"speed": {"baseline": arm, "candidate": {**arm, "acceptance_rate": 0.892},
                                 "tpot_speedup": 1.5, "ci_low": 1.25, "ci_high": 1.8,
                                 "confidence": 0.9, "throughput_ratio": 1.31,
                                 "min_speedup": 2.0, "gate": "missed", "note": None}})
    assert speed_change(summary).text == ("candidate 1.50x faster per output token (90% "
                                          "interval 1.25-1.80x)")
    section = speed_section(summary)
    assert section.speedup == speed_change(summary).text
    assert [r.acceptance for r in section.rows] == ["\u2013", "89.2%"]
    assert section.rows[0].ttft == "12.3 / 50.0"
    assert section.throughput == "candidate 1.31x faster in output tokens per second of task time"
    assert section.gate == ("required (gate.min_speedup): candidate at least 2x faster; missed: "
                            "the interval lies below it")


def test_no_speed_for_compare_runs():
    assert speed_change(_record({"arms": {"baseline": {"source": "a"},
                                          "candidate": {"source": "b"}}})) is None
    assert speed_change(_record({})) is None and speed_section(_record({})) is None


def _row(task, doc_id, baseline, candidate, response_b="b", response_c="c", prompt="p"):
    return {"task": task, "doc_id": doc_id, "metric": "acc", "baseline": baseline,
            "candidate": candidate, "target": "t", "prompt": prompt,
            "baseline_prediction": "x", "candidate_prediction": "y",
            "baseline_response": response_b, "candidate_response": response_c}


def _summary(*tasks):
    return _record({"tasks": [{"task": t, "binary": True, "gated": True, "verdict": "PASS"}
                              for t in tasks]})


def test_worse_items_first_and_tasks_take_turns():
    rows = [_row("big", i, 1.0, 0.0) for i in range(50)] + [_row("big", 100, 0.0, 1.0)]
    rows += [_row("small", i, 1.0, 0.0) for i in range(2)] + [_row("small", 9, 0.0, 1.0)]
    rows += [_row("big", 200, 1.0, 1.0)]  # unchanged: never a flipped item
    section = flipped_items(_summary("big", "small"), rows, max_items=6)
    shown = [(i.task, i.direction) for i in section.items]
    assert shown == [("big", WORSE)] * 4 + [("small", WORSE)] * 2
    assert section.total == 54 and section.left_out == 48
    counts = {c.task: c for c in section.counts}
    assert (counts["big"].worse_shown, counts["big"].better_total) == (4, 1)
    everything = flipped_items(_summary("big", "small"), rows, max_items=1000)
    assert [i.direction for i in everything.items if i.task == "small"] == \
        [WORSE, WORSE, BETTER]
    assert [i.doc_id for i in everything.items][:3] == ["0", "1", "2"]  # numeric order


def test_long_texts_are_windowed_and_the_cut_is_stated():
    shared = "x " * 5000
    row = _row("t", 1, 1.0, 0.0, response_b=shared + "old tail " * 1000,
               response_c=shared + "new tail " * 1000, prompt="intro " * 2000 + "Question?")
    item = flipped_items(_summary("t"), [row], max_items=10).items[0]
    assert item.prompt.text.endswith("Question?") and len(item.prompt.text) == PROMPT_TAIL_CHARS
    assert item.prompt.omitted_before == len(row["prompt"]) - PROMPT_TAIL_CHARS
    assert item.response_omitted_before > 0  # the window starts just before the divergence
    shown_b = "".join(s.text for s in item.baseline_segments)
    assert len(shown_b) == RESPONSE_CHARS and "old" in shown_b
    assert item.baseline_omitted_after == \
        len(row["baseline_response"]) - item.response_omitted_before - RESPONSE_CHARS


def test_side_by_side_flattens_and_marks_differences():
    assert flatten({"a": {"b": 1, "c": {}}, "d": [1, 2]}) == {"a.b": 1, "a.c": {}, "d": [1, 2]}
    table = pair_table("x", "X", {"k": 1, "same": "s"}, {"k": 2, "same": "s", "new": None})
    rows = {r.key: r for r in table.rows}
    assert rows["k"].differs and not rows["same"].differs
    assert (rows["new"].baseline, rows["new"].candidate) == ("\u2013", "null")
    assert table.differing == 2 and table.total == 3


def test_diff_of_a_generation_stuck_in_a_loop_is_one_quick_span():
    # without the popular-token and work bounds this takes seconds per item
    a, b = diff_segments("Answer: " + "old tail " * 440, "Answer: " + "new tail " * 440)
    assert [(s.text[:9], s.changed) for s in a] == [("Answer: ", False), ("old tail ", True),
                                                   ("tail ", False)]
    assert len(_changed(b)) == 1


def test_the_shift_panel_of_a_choice_task_matches_scipys_kl(regression_run):
    """The fake run's multiple-choice task logs per-choice log-likelihoods: its panel's mean
    KL is the mean over items of scipy's KL between the two arms' choice softmaxes."""
    import json

    from scipy import special, stats

    from evals.report._shift import shift_section

    summary = read_summary(regression_run)
    (task,) = [t for t in summary["shift"]["tasks"] if t["task"] == "boolq_tiny"]
    kls = []
    rows = [json.loads(line) for line in
            (regression_run / "paired_items.jsonl").read_text().splitlines()[1:]]
    by_doc = {r["doc_id"]: r for r in rows if r["task"] == "boolq_tiny"}
    for i in range(40):
        logliks = {}
        for arm in ("baseline", "candidate"):
            gap = 0.05 + (i % 7) / 10 + (0.02 if arm == "candidate" else 0.0)
            pred = by_doc[i][f"{arm}_response"]
            logliks[arm] = [-1.0 if c == pred else -1.0 - gap for c in ("no", "yes")]
        kls.append(stats.entropy(special.softmax(logliks["baseline"]),
                                 special.softmax(logliks["candidate"])))
    assert task["summary"]["mean_kl"] == pytest.approx(sum(kls) / len(kls), rel=1e-9)
    assert task["summary"]["n_items"] == 40 and task["test"] is None
    panel = {t.task: t for t in shift_section(RunRecord.model_validate(summary)).tasks}[
        "boolq_tiny"]
    assert panel.mean_kl == f"{sum(kls) / len(kls):.2e}" and not panel.shifted
