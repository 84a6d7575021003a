"""The trend page (history.html): every deployment's runs over time, from the run store.

Like the run report it is built in two steps: `build_trend_page` assembles plain
view-models from the store (runs, golden pins, per-task series and their control
charts), then `render_trend` fills the templates. The page is self-contained: inline
style only (admitted by its hash in the Content-Security-Policy), no script, no network.
Links to each run's own report.html are relative to the page, so the reports/ folder can
be moved or served as a whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from markupsafe import Markup

from evals.errors import UserError
from evals.decide.outcome import DRIFT_KIND
from evals.schemas import DRIFT_CHART
from evals.record.drift_record import DriftChartRecord
from evals.report._html import PACKAGE_DIR, _csp_hash, environment
from evals.report._outputs import _write_atomic
from evals.report._summary_rows import verdict_class
from evals.report._trend_chart import TaskChart, task_chart
from evals.store import RunEntry, RunStore

DEFAULT_TREND_FILE = "history.html"


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    created: str
    kind: str
    config_name: str
    verdict: str
    verdict_class: str
    golden: bool
    report_href: str | None
    """Relative link to the run's report.html, None when that file is gone."""
    n_items: int
    problem: str | None


@dataclass(frozen=True, slots=True)
class DeploymentSection:
    name: str
    anchor: str
    golden_run_id: str | None
    charts: tuple[TaskChart, ...]
    runs: tuple[RunRow, ...]
    """Newest first."""


@dataclass(frozen=True, slots=True)
class TrendPage:
    title: str
    generated: str
    store_root: str
    sections: tuple[DeploymentSection, ...]
    method: tuple[str, ...]


def _href(report: Path, out_dir: Path) -> str | None:
    if not report.is_file():
        return None
    relative = Path(os.path.relpath(report.resolve(), out_dir.resolve())).as_posix()
    return "./" + quote(relative, safe="/")  # quoting ':' also keeps any scheme out


def _run_row(entry: RunEntry, out_dir: Path) -> RunRow:
    verdict = entry.verdict or "?"
    return RunRow(
        run_id=entry.run_id, created=entry.created[:16].replace("T", " "), kind=entry.kind,
        config_name=entry.config_name or "\u2013", verdict=verdict,
        verdict_class=verdict_class(verdict), golden=entry.golden,
        report_href=_href(entry.report, out_dir) if entry.source_dir else None,
        n_items=entry.n_items, problem=entry.problem)


def gate_charts(store: RunStore,
                deployment: str) -> tuple[str | None, dict[str, DriftChartRecord]]:
    """The newest drift run of the deployment that stored control charts, and its charts
    per task (evals.decide.drift.chart_tasks), or (None, {})."""
    for entry in store.list_runs(limit=None, deployment=deployment):  # newest first
        if entry.kind != DRIFT_KIND:
            continue
        charts = store.get(entry.run_id).drift_charts
        if charts:
            return entry.run_id, {task: _chart(chart, f"run {entry.run_id}, drift chart of "
                                                      f"{task}")
                                  for task, chart in charts.items()}
    return None, {}


def _chart(chart: object, where: str) -> DriftChartRecord:
    """A stored drift chart, migrated (evals.schemas.DRIFT_CHART) and typed."""
    return DriftChartRecord.from_stored(DRIFT_CHART.load(chart, where), where)


def _section(store: RunStore, deployment: str, number: int, out_dir: Path) -> DeploymentSection:
    golden = store.golden(deployment)
    gate_run, gates = gate_charts(store, deployment)
    charts = tuple(task_chart(task, store.series(deployment, task),
                              gates[task] if task in gates else None, gate_run,
                              golden.run_id if golden else None)
                   for task in store.tasks(deployment))
    runs = store.list_runs(limit=None, deployment=deployment)
    return DeploymentSection(
        name=deployment, anchor=f"deployment-{number}",
        golden_run_id=golden.run_id if golden else None, charts=charts,
        runs=tuple(_run_row(e, out_dir) for e in runs))


def _method() -> tuple[str, ...]:
    return (
        "Points: each run's delta (candidate minus baseline; for a drift run, this run minus "
        "the golden run) in percentage points, with the interval its verdict used; runs are "
        "in time order.",
        "Line and dashed limit: the drift gate's own EWMA control chart, as the newest drift "
        "run stored it - its lambda and L (the config's `drift:`), target 0, sigma per run "
        "the paired standard error, exact limits (Montgomery, Introduction to Statistical "
        "Quality Control, sec. 9.2). Nothing is recomputed for the page.",
        "Alarms (red): the runs where that chart's EWMA fell below its lower limit; an alarm "
        "at the newest drift run is what made its verdict REGRESSION. The gate looks for "
        "drops only.",
        "Tasks no drift run charted (A/B runs, comparisons) show their points only.",
    )


def build_trend_page(store: RunStore, deployment: str | None, out_dir: Path) -> TrendPage:
    """View-model of the trend page for one deployment, or every deployment when None."""
    known = store.deployments()
    if deployment is not None and deployment not in known:
        raise UserError(f"no runs recorded for deployment {deployment!r} in {store.root} "
                        f"(known: {', '.join(known) or 'none'}).")
    names = (deployment,) if deployment is not None else known
    title = f"History \u2013 {deployment or 'all deployments'} \u2013 vllm-regression-evals"
    return TrendPage(
        title=title, generated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        store_root=str(store.root),
        sections=tuple(_section(store, name, i, out_dir) for i, name in enumerate(names)),
        method=_method())


def render_trend(page: TrendPage) -> str:
    css = "\n".join((PACKAGE_DIR / name).read_text(encoding="utf-8")
                    for name in ("report.css", "trend.css"))
    policy = (f"default-src 'none'; style-src {_csp_hash(css)}; script-src 'none'; "
              "img-src data:; base-uri 'none'; form-action 'none'")
    # Markup only for our own package file, never for anything read from the store
    return environment().get_template("trend.html.j2").render(page=page, css=Markup(css),
                                                               csp=policy)


def write_trend(store: RunStore, deployment: str | None, out_path: Path) -> Path:
    """Writes the trend page to `out_path` (atomically) and returns its path."""
    out_path = Path(out_path)
    if out_path.is_dir():
        out_path = out_path / DEFAULT_TREND_FILE
    out_path.parent.mkdir(parents=True, exist_ok=True)
    page = build_trend_page(store, deployment, out_path.parent)
    _write_atomic(out_path, render_trend(page))
    return out_path


__all__ = ["DEFAULT_TREND_FILE", "TrendPage", "build_trend_page", "render_trend",
           "write_trend"]
