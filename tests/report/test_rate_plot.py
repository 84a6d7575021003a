"""The report's per-item rate differences of sampled tasks (evals.report._rate_plot)."""

from __future__ import annotations

import re

import pytest

from evals.record.run_record_model import RunRecord
from evals.report._html import render_html
from evals.report._page import build_page
from evals.report._rate_plot import FALL, RISE, SAME, rate_histogram, rate_plots


def _run(tasks: list[dict]) -> RunRecord:
    return RunRecord.model_validate({
        "kind": "ab", "run_id": "r", "created": "", "suite_version": "", "verdict": "PASS",
        "exit_code": 0, "reason": "", "gate": {"alpha": 0.05, "margin": 0.03,
                                               "correction": "holm"},
        "tasks": tasks, "arms": {}, "sources": {}, "config": {}, "warnings": []})


def _task(name: str, repeats: int | None) -> dict:
    task = {"task": name, "binary": repeats is None, "gated": True, "verdict": "PASS"}
    if repeats is not None:
        task["repeats"] = {"repeats": repeats, "method": "sign-flip", "missing": 0,
                           "items_dropped": 0, "items_gained": 0}
    return task


def _row(task: str, doc_id: int, baseline: float, candidate: float) -> dict:
    return {"task": task, "doc_id": doc_id, "metric": "exact_match", "baseline": baseline,
            "candidate": candidate, "target": "t", "prompt": "p",
            "baseline_prediction": "x", "candidate_prediction": "y",
            "baseline_response": "b", "candidate_response": "c"}


def test_each_item_counts_once_at_its_multiple_of_one_over_k():
    # k = 4: differences -1, -0.5 (twice), 0 (three times), +0.25
    h = rate_histogram("t", 4, [-1.0, -0.5, -0.5, 0.0, 0.0, 0.0, 0.25])
    assert [b.difference for b in h.bars] == ["-100", "-75", "-50", "-25", "0", "+25", "+50",
                                              "+75", "+100"]
    assert [b.count for b in h.bars] == [1, 0, 2, 0, 3, 1, 0, 0, 0]
    assert [b.kind for b in h.bars] == [FALL] * 4 + [SAME] + [RISE] * 4
    assert (h.items, h.fell, h.rose) == (7, 3, 1)
    assert h.mean == f"{round(100 * -1.75 / 7, 1):+g}"
    # bar heights are proportional to the counts, the tallest fills the plot
    tallest = max(h.bars, key=lambda b: b.count)
    assert tallest.height == h.plot_bottom - h.plot_top
    assert h.bars[0].height * 3 == pytest.approx(tallest.height, abs=0.02)
    assert all(b.y + b.height == pytest.approx(h.plot_bottom) for b in h.bars)
    # bars left to right, none overlapping
    assert all(a.x + a.width < b.x for a, b in zip(h.bars, h.bars[1:]))


def test_an_identical_run_puts_every_item_on_zero_and_many_repeats_thin_the_labels():
    h = rate_histogram("t", 8, [0.0] * 40)
    assert [b.count for b in h.bars if b.count] == [40] and h.mean == "0"
    assert (h.fell, h.rose) == (0, 0)
    assert len(h.ticks) <= 9 and "0" in [t.label for t in h.ticks]


def test_only_sampled_tasks_get_a_histogram_and_the_page_shows_it():
    run = _run([_task("sampled", 2), _task("greedy", None)])
    rows = [_row("sampled", 0, 1.0, 0.5), _row("sampled", 1, 0.5, 0.5),
            _row("greedy", 0, 1.0, 0.0)]
    plots = rate_plots(run, rows)
    (h,) = plots.histograms
    assert h.task == "sampled" and [b.count for b in h.bars] == [0, 1, 1, 0, 0]
    html = render_html(build_page(run, rows, max_flipped_items=10))
    assert '<section id="rates">' in html and 'href="#rates"' in html
    assert len(re.findall(r'<rect class="bar ', html)) == 5
    assert "the rate fell at 1, rose at 0" in html
    plain = render_html(build_page(_run([_task("greedy", None)]), rows[2:], 10))
    assert 'id="rates"' not in plain and 'href="#rates"' not in plain
