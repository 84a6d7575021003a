"""The trend page: hostile names stay text, links reach each run's report, alarms and the
golden run are marked. Parsed with lxml, no browser needed."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import lxml.html
import numpy as np
import pytest
from synthetic_runs import PlantedTask, write_synthetic_run

from evals.errors import UserError
from evals.report.trend import build_trend_page, write_trend
from evals.store import RunStore

HOSTILE_RUN = '<img src=x onerror="window.__pwned=1">'
HOSTILE_TASK = "drift</title><script>window.__pwned=2</script>"
HOSTILE_DEPLOYMENT = "dep<script>window.__pwned=3</script>"
SCHEME_DIR = "javascript:alert(1)"
WEEKS = 12
SHIFT_FROM = 6  # weeks 6.. lose 10 more of 2,000 items: -0.5 pts, 2.2 sigma of the noise floor


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[RunStore, Path]:
    root = tmp_path_factory.mktemp("trend")
    reports = root / "reports"
    store = RunStore(reports / "store")
    rng = np.random.default_rng(7)
    for week in range(WEEKS):
        run_id = HOSTILE_RUN if week == 3 else f"week-{week:02d}"
        directory = reports / (SCHEME_DIR if week == 4 else f"run-{week:02d}")
        worse = 100 + (10 if week >= SHIFT_FROM else 0)
        write_synthetic_run(
            directory, run_id=run_id, created=f"2026-03-{week + 1:02d}T06:00:00+00:00",
            tasks=[PlantedTask(HOSTILE_TASK, 2000, worse, 100, noise_flips=20),
                   PlantedTask("flat", 500, 20, 20)],
            rng=rng, config_name=HOSTILE_DEPLOYMENT)
        if week != 5:  # week 5's report was deleted
            (directory / "report.html").write_text("<p>report</p>", encoding="utf-8")
        store.record_run(directory)
    store.pin("week-01", HOSTILE_DEPLOYMENT)
    out = write_trend(store, None, reports / "history.html")
    return store, out


@pytest.fixture(scope="module")
def page(history):
    _, out = history
    return lxml.html.parse(str(out)).getroot()


def test_hostile_names_stay_text(page, history):
    html = history[1].read_text(encoding="utf-8")
    assert page.xpath("//script") == [] and page.xpath("//img") == []
    assert "<script>window" not in html and "<img src=x" not in html
    text = page.text_content()
    for hostile in (HOSTILE_RUN, HOSTILE_TASK, HOSTILE_DEPLOYMENT):
        assert hostile in text
    policy = page.xpath("//meta[@http-equiv='Content-Security-Policy']/@content")[0]
    assert "default-src 'none'" in policy and "script-src 'none'" in policy


def test_each_run_links_to_its_own_report(page, history):
    store, out = history
    rows = page.xpath("//table[contains(@class, 'runs')]/tbody/tr")
    assert len(rows) == WEEKS
    by_run = {row.xpath(".//span[@class='run-id']")[0].text_content(): row for row in rows}
    for entry in store.list_runs(limit=None):
        links = by_run[entry.run_id].xpath(".//a/@href")
        if not entry.report.exists():
            assert links == [] and "not found" in by_run[entry.run_id].text_content()
            continue
        href, = links
        assert href.startswith("./") and ":" not in href  # relative, no scheme
        assert (out.parent / unquote(href)).resolve() == entry.report.resolve()


def test_golden_run_is_marked(page):
    golden_rows = page.xpath("//tr[contains(@class, 'golden')]")
    assert [r.xpath(".//span[@class='run-id']")[0].text_content() for r in golden_rows] == \
        ["week-01"]
    for chart in page.xpath("//figure[contains(@class, 'trend')]"):
        golden_points = chart.xpath(".//g[contains(@class, 'golden')]")
        assert len(golden_points) == 1
        assert "week-01" in golden_points[0].xpath("./title")[0].text_content()


def test_alarms_are_marked_only_after_the_shift(page):
    charts = {f.xpath("./figcaption/span[@class='task']")[0].text_content(): f
              for f in page.xpath("//figure[contains(@class, 'trend')]")}
    assert set(charts) == {HOSTILE_TASK, "flat"}
    points = charts[HOSTILE_TASK].xpath(".//g[contains(@class, 'run')]")
    assert len(points) == WEEKS
    alarmed = [i for i, g in enumerate(points) if "alarm" in g.get("class").split()]
    assert alarmed and min(alarmed) >= SHIFT_FROM
    assert all("ALARM" in points[i].xpath("./title")[0].text_content() for i in alarmed)
    assert charts["flat"].xpath(".//g[contains(@class, 'alarm')]") == []
    for chart in charts.values():  # the EWMA line and both control limits are drawn
        assert len(chart.xpath(".//polyline[@class='limit']")) == 2
        assert len(chart.xpath(".//polyline[@class='ewma']")) == 1


def test_view_model_states_its_sigma_and_target(history):
    store, out = history
    trend = build_trend_page(store, HOSTILE_DEPLOYMENT, out.parent)
    section, = trend.sections
    charts = {c.task: c for c in section.charts}
    assert "noise floor" in charts[HOSTILE_TASK].sigma_note
    assert "paired standard error" in charts["flat"].sigma_note
    assert "golden run week-01" in charts["flat"].target_note
    assert section.golden_run_id == "week-01"


def test_unknown_deployment_and_empty_store(history, tmp_path):
    store, _ = history
    with pytest.raises(UserError, match="no runs recorded for deployment 'nope'"):
        write_trend(store, "nope", tmp_path / "h.html")
    out = write_trend(RunStore(tmp_path / "empty"), None, tmp_path / "h.html")
    assert "No runs are recorded" in out.read_text(encoding="utf-8")
