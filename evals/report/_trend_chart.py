"""One task's trend chart: its delta per run with intervals and, when a drift gate charted
the task, exactly that gate's EWMA line, lower control limit and alarms. Geometry in SVG
user units, computed here; the template only places the shapes. The y axis is in
percentage points, the x axis is run order.

Nothing is recomputed here. The drift gate (evals.decide.drift.chart_tasks) stores its chart in
each drift run's summary - lambda, L, target, sigma per run, the EWMA, the limit and the
alarms - and the page draws the newest drift run's chart, so the page and the gate cannot
disagree. Runs of other kinds (A/B runs of the deployment, comparisons) are drawn as
points without a control chart: no gate watched them as a series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evals.record.drift_record import DriftChartRecord
from evals.report import _formatting as fmt
from evals.report._svg_axis import Axis
from evals.store import SeriesPoint

WIDTH = 760
HEIGHT = 230
LEFT = 64
RIGHT = 16
TOP = 12
BOTTOM = 40
MAX_DATE_LABELS = 6


@dataclass(frozen=True, slots=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True, slots=True)
class ChartPoint:
    run_id: str
    x: float
    y: float
    y_low: float | None
    y_high: float | None
    golden: bool
    alarm: bool
    tooltip: str


@dataclass(frozen=True, slots=True)
class TaskChart:
    task: str
    metric: str
    width: int
    height: int
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    points: tuple[ChartPoint, ...]
    ewma_line: str
    """SVG polyline points of the gate's EWMA ('' when no gate charted the task)."""
    lower_line: str
    """The gate's lower control limit (the gate alarms on drops only)."""
    target_y: float | None
    zero_y: float
    y_ticks: tuple[Tick, ...]
    x_labels: tuple[Tick, ...]
    sigma_note: str
    alarm_note: str
    target_note: str
    alarms: tuple[str, ...]
    """Run ids the gate alarmed at, in run order."""


def _date(iso: str) -> str:
    return iso[:16].replace("T", " ")


def _polyline(xs: list[float], ys: list[float]) -> str:
    return " ".join(f"{x:.2f},{y:.2f}" for x, y in zip(xs, ys))


def _gate_points(gate: DriftChartRecord,
                 series: tuple[SeriesPoint, ...]) -> list[SeriesPoint | tuple]:
    """The gate's runs in its order: the stored series point when the store has it (for
    the interval, date and golden flag), else (run_id, delta) from the chart itself."""
    by_run = {p.run_id: p for p in series}
    return [by_run[run] if run in by_run else (run, delta)
            for run, delta in zip(gate.runs, gate.delta)]


def task_chart(task: str, series: tuple[SeriesPoint, ...], gate: DriftChartRecord | None,
               gate_run_id: str | None, golden_run_id: str | None) -> TaskChart:
    """The chart of one task: `series` is every stored run's point (oldest first); `gate`
    the newest drift run's stored chart of this task (`gate_run_id`), or None."""
    points = _gate_points(gate, series) if gate else list(series)
    alarm_idx = set(gate.alarms) if gate else set()
    target = (gate.target or 0.0) if gate else None

    def delta(p) -> float:
        return p.delta if isinstance(p, SeriesPoint) else float(p[1])

    values = [0.0]
    for p in points:
        values.append(delta(p) * 100)
        if isinstance(p, SeriesPoint):
            values += [v * 100 for v in (p.ci_low, p.ci_high) if fmt.finite(v)]
    if gate:
        values += [v * 100 for v in gate.lower_limit + gate.ewma if fmt.finite(v)]
    top, bottom = float(TOP), float(HEIGHT - BOTTOM)
    left, right = float(LEFT), float(WIDTH - RIGHT)
    axis = Axis.fit(values, start=bottom, end=top, pad_share=0.06, min_pad=0.25,
                    target_ticks=5)

    def y(value: float) -> float:
        return axis.position(value * 100)

    def y_or_none(value) -> float | None:
        return y(value) if fmt.finite(value) else None

    slot = (right - left) / max(len(points), 1)
    xs = [round(left + slot * (i + 0.5), 2) for i in range(len(points))]
    chart_points = []
    for i, p in enumerate(points):
        alarm = i in alarm_idx
        if isinstance(p, SeriesPoint):
            chart_points.append(ChartPoint(
                run_id=p.run_id, x=xs[i], y=y(p.delta), y_low=y_or_none(p.ci_low),
                y_high=y_or_none(p.ci_high), golden=p.golden, alarm=alarm,
                tooltip=(f"{p.run_id} ({_date(p.created)}): delta {fmt.points(p.delta)} pts "
                         f"{fmt.points_interval(p.ci_low, p.ci_high)}, n={p.n}, "
                         f"{p.verdict or '?'}" + (", golden" if p.golden else "")
                         + (", ALARM" if alarm else ""))))
        else:
            chart_points.append(ChartPoint(
                run_id=p[0], x=xs[i], y=y(delta(p)), y_low=None, y_high=None, golden=False,
                alarm=alarm, tooltip=f"{p[0]}: delta {fmt.points(delta(p))} pts (not in the "
                                     "store any more)" + (", ALARM" if alarm else "")))
    dated = [p for p in points if isinstance(p, SeriesPoint)]
    every = max(1, math.ceil(len(points) / MAX_DATE_LABELS))
    x_labels = tuple(Tick(xs[i], points[i].created[:10]) for i in range(0, len(points), every)
                     if isinstance(points[i], SeriesPoint))
    alarms = tuple(chart_points[i].run_id for i in sorted(alarm_idx) if i < len(chart_points))
    if gate:
        sigma_note = f"sigma per run: {gate.sigma_source or 'as the drift gate used'}"
        alarm_note = (f"the drift gate's chart as stored by {gate_run_id}: {gate.method}; "
                      + (f"{len(alarms)} alarm(s), first at {alarms[0]}" if alarms
                         else "no alarm"))
        target_note = (f"target: {target * 100:g} pts (each drift run's delta is already "
                       "against the golden run"
                       + (f" {golden_run_id})" if golden_run_id else ")"))
    else:
        sigma_note = ("no control chart: no drift run of this deployment charted this task "
                      "(`python -m evals drift` does)")
        alarm_note = ""
        target_note = "points: each run's delta and interval"
    return TaskChart(
        task=task, metric=dated[-1].metric if dated else (series[-1].metric if series else ""),
        width=WIDTH, height=HEIGHT, plot_left=left, plot_right=right, plot_top=top,
        plot_bottom=bottom, points=tuple(chart_points),
        ewma_line=_polyline(xs, [y(v) for v in gate.ewma]) if gate else "",
        lower_line=_polyline(xs, [y(v) for v in gate.lower_limit]) if gate else "",
        target_y=y(target) if target is not None else None, zero_y=y(0.0),
        y_ticks=tuple(Tick(position, label) for position, label in axis.ticks()),
        x_labels=x_labels, sigma_note=sigma_note, alarm_note=alarm_note,
        target_note=target_note, alarms=alarms)
