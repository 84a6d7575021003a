"""report.html: sections, numbers, escaping and self-containment (no browser needed)."""

from __future__ import annotations

import re
import shutil

import pytest
from fake_runs import ODD_TASK, XSS_RESPONSE

from evals.errors import UserError
from evals.report import write_reports


@pytest.fixture(scope="module")
def html(regression_run) -> str:
    return (regression_run / "report.html").read_text(encoding="utf-8")


def test_write_reports_writes_and_returns_three_files(regression_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(regression_run, run)
    for name in ("report.html", "summary.md", "junit.xml"):
        (run / name).unlink()
    written = write_reports(run)
    assert written == {"html": run / "report.html", "markdown": run / "summary.md",
                       "junit": run / "junit.xml"}
    assert all(path.stat().st_size > 0 for path in written.values())


def test_sections_come_in_order(html):
    ids = ["verdict", "summary", "forest", "flips", "items", "arms", "method"]
    positions = [html.index(f'<section id="{i}"') for i in ids]
    assert positions == sorted(positions)


def test_banner_states_verdict_worst_delta_margin_and_speed(html):
    banner = html[html.index('<section id="verdict"'):html.index('<section id="summary"')]
    assert 'class="banner regression"' in banner
    assert "REGRESSION" in banner and "regression in gsm8k_tiny" in banner
    assert "-18.3 pts [-28.4, -9.7]" in banner
    assert "&minus;5.0 pts" in banner
    assert ("candidate 1.60x faster in generated tokens per second (candidate 69.3 vs "
            "baseline 43.3, over 3 task(s), task wall time)") in banner


def test_summary_table_has_one_row_per_task(html):
    table = html[html.index('<table class="tasks">'):html.index("</table>")]
    assert table.count("<tr>") == 1 + 3
    assert "gsm8k_tiny" in table and "boolq_tiny" in table
    assert "(not gated)" in table
    assert "0.00342" in table  # Holm-adjusted p of the regressing task


def test_forest_plot_is_inline_svg_with_margin_line(html):
    svg = re.search(r'<svg class="forest".*?</svg>', html, re.S).group(0)
    assert svg.count("<circle") == 3
    assert 'class="margin"' in svg and "margin -5 pts" in svg
    margin_x = float(re.search(r'class="margin" x1="([\d.]+)"', svg).group(1))
    zero_x = float(re.search(r'class="zero" x1="([\d.]+)"', svg).group(1))
    assert margin_x < zero_x


def test_page_is_self_contained(html):
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", html)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert "@import" not in html and "url(" not in html
    assert "default-src 'none'" in html.replace("&#39;", "'")


def test_model_text_is_escaped_not_markup(html):
    assert html.count("<script") == 1  # the page's own filter script
    assert "window.__pwned=1</script>" not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt; **md**" in html
    assert "<img" not in html and "&lt;img src=x onerror=" in html
    assert "<i>name</i>" not in html  # the odd task name is text everywhere
    assert XSS_RESPONSE not in html


def test_flip_analysis_shows_two_by_two_and_label_shift(html):
    flips = html[html.index('<section id="flips"'):html.index('<section id="items"')]
    assert flips.count('class="two-by-two"') == 2  # the two binary tasks
    assert flips.count('class="confusion"') == 3  # boolq: baseline, candidate, difference
    assert "Stuart&ndash;Maxwell" in flips and "Predicted labels" in flips
    assert "Continuous metric: 5 item(s) scored lower, 6 higher" in flips


def test_flipped_items_worse_first_with_differing_span_marked(html):
    items = re.findall(r'<article class="item (c2w|w2c)" data-task="([^"]*)"', html)
    assert len(items) == 29
    gsm = [d for d, t in items if t == "gsm8k_tiny"]
    assert gsm == ["c2w"] * 12 + ["w2c"]
    assert "is <mark>11</mark>. The answer is <mark>11</mark>." in html
    assert "is <mark>1001</mark>. The answer is <mark>1001</mark>." in html


def test_cap_limits_embedded_items_and_says_how_many_were_left_out(regression_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(regression_run, run)
    html = write_reports(run, max_flipped_items=5)["html"].read_text(encoding="utf-8")
    items = re.findall(r'<article class="item (c2w|w2c)" data-task="([^"]*)"', html)
    assert len(items) == 5
    assert {d for d, _ in items} == {"c2w"}  # worse items are chosen first ...
    assert len({t for _, t in items}) == 3  # ... with every task taking its turn
    assert "<strong>24 left out</strong>" in html
    assert "at most 5 per report" in html


def test_compare_run_without_manifest_details(compare_run):
    html = (compare_run / "report.html").read_text(encoding="utf-8")
    assert 'class="banner pass"' in html
    assert "not measured in this run" in html
    assert "lm-eval config" in html and "model_args" in html
    assert "Effective engine config" not in html


def test_missing_paired_items_still_reports(regression_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(regression_run, run)
    (run / "paired_items.jsonl").unlink()
    html = write_reports(run)["html"].read_text(encoding="utf-8")
    assert "paired_items.jsonl was not found" in html
    assert "<article class=\"item" not in html


def test_run_dir_without_summary_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no summary.json"):
        write_reports(tmp_path)


def test_odd_task_name_is_escaped_in_attributes(html):
    assert 'data-task="edge|&lt;i&gt;name&lt;/i&gt;`x`"' in html
    assert ODD_TASK not in html
