"""The report stays under 5 MB however many items flip, and however long their texts are."""

from __future__ import annotations

import re

from fake_runs import many_flips_run

from evals.report import write_reports
from evals.report._flipped_items import ITEM_BYTES_BUDGET, flipped_items
from evals.report._html import render_html
from evals.report._page import build_page
from evals.record.run_record import read_summary
from evals.record.run_record_model import RunRecord

LIMIT = 5 * 1024 * 1024


def test_ten_thousand_flipped_items_stay_under_5_mb(tmp_path):
    run = many_flips_run(tmp_path / "many")
    html_path = write_reports(run)["html"]
    html = html_path.read_text(encoding="utf-8")
    assert html_path.stat().st_size < LIMIT
    assert len(re.findall(r'<article class="item ', html)) == 200
    assert "10000 item(s) changed score; 200 are shown, <strong>9800 left out</strong>" in html


def _pathological_rows(n: int) -> list[dict]:
    # text that grows 4-5x when escaped, far longer than any window
    nasty = "<&>\"'" * 20_000
    return [{"task": "t", "doc_id": i, "metric": "acc", "baseline": 1.0, "candidate": 0.0,
             "target": nasty, "prompt": nasty, "baseline_prediction": nasty,
             "candidate_prediction": nasty, "baseline_response": nasty,
             "candidate_response": nasty[::-1]} for i in range(n)]


def test_escaping_heavy_texts_hit_the_byte_budget_not_the_limit(regression_run):
    summary = read_summary(regression_run)
    summary["tasks"][0]["task"] = "t"
    summary = RunRecord.model_validate(summary)
    rows = _pathological_rows(200)
    section = flipped_items(summary, rows, max_items=200)
    assert section.budget_reached and 0 < section.shown < 200
    html = render_html(build_page(summary, rows, 200))
    assert len(html.encode("utf-8")) < LIMIT
    assert ITEM_BYTES_BUDGET < LIMIT
    assert "a size budget for their text was reached" in html
