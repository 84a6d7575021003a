"""The trend page: hostile names stay text, links reach each run's report, the golden run
is marked, and the control chart is the drift gate's own: the page marks exactly the alarms
the gate raised, with the config's lambda and L. Parsed with lxml, no browser needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import lxml.html
import numpy as np
import pytest
from synthetic_runs import PlantedTask, write_synthetic_run

from evals.errors import UserError
from evals.report.trend import build_trend_page, write_trend
from evals.store import RunStore

REPO = Path(__file__).resolve().parents[2]
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


def test_runs_no_drift_gate_charted_are_points_without_a_control_chart(page):
    charts = {f.xpath("./figcaption/span[@class='task']")[0].text_content(): f
              for f in page.xpath("//figure[contains(@class, 'trend')]")}
    assert set(charts) == {HOSTILE_TASK, "flat"}
    for chart in charts.values():
        assert len(chart.xpath(".//g[contains(@class, 'run')]")) == WEEKS
        assert chart.xpath(".//g[contains(@class, 'alarm')]") == []
        assert chart.xpath(".//polyline") == []
        assert "no drift run of this deployment charted this task" in chart.text_content()


LAM, L = 0.4, 2.0  # not the defaults (0.2, 2.7): the page must draw the gate's own chart
DRIFT_WEEKS = 12
DRIFT_FROM = 5  # weeks 5.. lose 25 more of 2,000 items each (about 1.7 sigma)


@pytest.fixture(scope="module")
def drift_store(tmp_path_factory):
    """Weekly drift runs of one deployment made as `run_drift` makes them: pair, analyse,
    decide, then the EWMA gate over the earlier drift runs in the store (evals.decide.drift), its
    chart stored in the summary and the run recorded. An A/B run of the deployment is
    recorded too; it is not part of the drift series."""
    from synthetic_runs import paired_task

    from evals.analyse.task_analysis import analyse_task
    from evals.decide.drift import apply_chart, chart_tasks, history_points, summary_extras
    from evals.decide.verdict import decide

    root = tmp_path_factory.mktemp("drift-trend")
    store = RunStore(root / "store")
    rng = np.random.default_rng(5)
    ab = write_synthetic_run(root / "ab", run_id="weekly-ab", rng=rng,
                             created="2026-01-01T06:00:00+00:00",
                             tasks=[PlantedTask("t", 2000, 400, 10, verdict="REGRESSION")])
    store.record_run(ab, kind="ab", deployment="weekly")
    gate_alarm_now = {}
    for week in range(DRIFT_WEEKS):
        run_id = f"weekly-drift-{week:02d}"
        planted = PlantedTask("t", 2000, 100 + (25 if week >= DRIFT_FROM else 0), 100,
                              verdict="PASS")
        analysis = analyse_task(paired_task(planted, rng, text=False), gated=True, alpha=0.05,
                                margin=0.03, seed=1, n_resamples=200)
        verdict = decide([analysis], alpha=0.05, margin=0.03)
        history = history_points(store, "weekly", ["t"], exclude=run_id)
        charts = chart_tasks([analysis], history, lam=LAM, L=L, run_id=run_id)
        final = apply_chart(verdict, charts)
        gate_alarm_now[run_id] = charts["t"]["alarm_now"]
        extra = {"kind": "drift", "verdict": final.verdict.value, "reason": final.reason,
                 **summary_extras("weekly", "weekly-ab", "candidate", charts)}
        run = write_synthetic_run(root / run_id, run_id=run_id, rng=rng, tasks=[planted],
                                  created=f"2026-02-{week + 1:02d}T06:00:00+00:00",
                                  text=False, extra=extra)
        store.record_run(run, kind="drift", deployment="weekly")
    out = write_trend(store, "weekly", root / "history.html")
    return store, out, charts["t"], gate_alarm_now


def _reference_alarms(deltas, sigmas, lam: float, width: float) -> list[int]:
    """The EWMA recursion and its exact variance with one sigma per run, written out:
    var(z_i) = sum_j (lam (1 - lam)^(i - j) sigma_j)^2; a drop alarms below -width sd."""
    z, found = 0.0, []
    for i, x in enumerate(deltas):
        z = lam * x + (1 - lam) * z
        var = sum((lam * (1 - lam) ** (i - j) * sigmas[j]) ** 2 for j in range(i + 1))
        if z < -width * np.sqrt(var):
            found.append(i)
    return found


def test_the_page_marks_exactly_the_drift_gates_alarms(drift_store):
    store, out, gate, alarm_now = drift_store
    alarmed_by_gate = [run for run, alarm in alarm_now.items() if alarm]
    assert alarmed_by_gate, "the planted drift must make the gate alarm"
    # the newest chart holds every earlier run's decision (the EWMA and its limit at a run
    # depend on that run and the ones before it only)
    assert [gate["runs"][i] for i in gate["alarms"]] == alarmed_by_gate
    # those are the runs whose stored verdict the gate made REGRESSION
    entries = {e.run_id: e for e in store.list_runs(limit=None, deployment="weekly")}
    assert [r for r in gate["runs"] if entries[r].verdict == "REGRESSION"] == alarmed_by_gate
    page = lxml.html.parse(str(out)).getroot()
    (figure,) = page.xpath("//figure[contains(@class, 'trend')]")
    runs = figure.xpath(".//g[contains(@class, 'run')]")
    titles = [g.xpath("./title")[0].text_content() for g in runs]
    assert [t.split(" ")[0] for t in titles] == gate["runs"]  # drift runs only, in order
    marked = [t.split(" ")[0] for g, t in zip(runs, titles)
              if "alarm" in g.get("class").split()]
    assert marked == alarmed_by_gate
    assert all(("ALARM" in t) == ("alarm" in g.get("class").split())
               for g, t in zip(runs, titles))
    assert len(figure.xpath(".//polyline[@class='ewma']")) == 1
    assert len(figure.xpath(".//polyline[@class='limit']")) == 1  # one-sided: lower only
    assert f"lambda={LAM:g}, L={L:g}" in figure.text_content()
    # an independent reference gives these alarms with the gate's lambda and L, and
    # others with the defaults: a page drawing its own default chart would differ
    assert _reference_alarms(gate["delta"], gate["sigma"], LAM, L) == gate["alarms"]
    assert _reference_alarms(gate["delta"], gate["sigma"], 0.2, 2.7) != gate["alarms"]


def test_view_model_states_the_gates_settings(drift_store):
    store, out, gate, _ = drift_store
    trend = build_trend_page(store, "weekly", out.parent)
    (section,) = trend.sections
    (chart,) = section.charts
    assert "paired standard error" in chart.sigma_note
    assert "target: 0" in chart.target_note
    assert chart.alarms == tuple(gate["runs"][i] for i in gate["alarms"])
    assert f"weekly-drift-{DRIFT_WEEKS - 1:02d}" in chart.alarm_note  # the newest run's chart


def test_history_command_imports_no_statistics(drift_store, tmp_path):
    """`history` reads the store and the drift gate's stored charts: with scipy unimportable
    (evals.decide.outcome) it draws the same chart, with the same alarms, as write_trend."""
    store, out, _, _ = drift_store
    page = tmp_path / "history.html"
    code = ("import sys; sys.modules.update(scipy=None); "
            "from evals.cli import main; sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "history", "--deployment", "weekly",
                             "--store", str(store.root), "--out", str(page)],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0 and result.stderr == "", result.stderr[-2000:]

    def chart(path: Path) -> str:
        (figure,) = lxml.html.parse(str(path)).getroot().xpath("//figure[contains(@class, "
                                                                "'trend')]")
        return lxml.html.tostring(figure, encoding="unicode")

    assert "alarm" in chart(page) and chart(page) == chart(out)


def test_unknown_deployment_and_empty_store(history, tmp_path):
    store, _ = history
    with pytest.raises(UserError, match="no runs recorded for deployment 'nope'"):
        write_trend(store, "nope", tmp_path / "h.html")
    out = write_trend(RunStore(tmp_path / "empty"), None, tmp_path / "h.html")
    assert "No runs are recorded" in out.read_text(encoding="utf-8")
