"""One task's drift chart: its delta per run with intervals, the EWMA line and its control
limits, alarmed runs marked. Geometry in SVG user units, computed here; the template only
places the shapes. The y axis is in percentage points, the x axis is run order.

What is charted (stated on the page):
* target: the golden run's delta for the task when the deployment has one pinned, else 0;
* sigma per run: the A/A noise floor, sqrt(noise flips) / n, when every run measured a
  non-zero one (the run-to-run spread of a delta over a fixed item set: each of the
  noise flips moves the delta by 1/n either way); else the paired standard error
  of each run's delta, which also counts item sampling and so makes the chart slower
  to alarm; a run where no item changed gets the standard error of one change, 1/n; else
  (no standard errors) the moving-range estimate from the deltas themselves;
* EWMA (lam, L) and tabular CUSUM (k, h) alarm on drops only; a run is marked when
  either alarms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evals.report import _formatting as fmt
from evals.report._forest_plot import _nice_step
from evals.store import SeriesPoint
from evals.stats.control_chart import cusum_chart, ewma_chart

WIDTH = 760
HEIGHT = 230
LEFT = 64
RIGHT = 16
TOP = 12
BOTTOM = 40
MAX_DATE_LABELS = 6

EWMA_LAMBDA = 0.2
EWMA_L = 2.7
CUSUM_K = 0.5
CUSUM_H = 4.0


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
    """SVG polyline points of the EWMA statistic ('' when not charted)."""
    upper_line: str
    lower_line: str
    target_y: float | None
    zero_y: float
    y_ticks: tuple[Tick, ...]
    x_labels: tuple[Tick, ...]
    sigma_note: str
    alarm_note: str
    target_note: str


@dataclass(frozen=True, slots=True)
class _Control:
    ewma: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    alarms: frozenset[int]
    sigma_note: str
    alarm_note: str


def _sigma(series: tuple[SeriesPoint, ...]) -> tuple[np.ndarray | None, str]:
    if all(p.noise_flips and p.n for p in series):
        return (np.array([math.sqrt(p.noise_flips) / p.n for p in series]),
                "sigma per run: the A/A noise floor, sqrt(noise flips) / n")
    if all(p.standard_error is not None and p.n for p in series):
        return (np.array([max(p.standard_error, 1.0 / p.n) for p in series]),
                "sigma per run: the paired standard error of its delta (item sampling "
                "included, so the chart is slow to alarm)")
    return None, "sigma: the moving-range estimate from the deltas (some runs have no " \
                 "standard error)"


def _date(iso: str) -> str:
    return iso[:16].replace("T", " ")


def _first_alarm_text(name: str, alarms: tuple[int, ...], series) -> str:
    if not alarms:
        return f"{name}: no alarm"
    first = series[alarms[0]]
    return f"{name}: {len(alarms)} alarm(s), first at {first.run_id} ({_date(first.created)})"


def _control(series: tuple[SeriesPoint, ...], target: float) -> _Control | None:
    deltas = np.array([p.delta for p in series])
    sigma, note = _sigma(series)
    if sigma is None and (len(series) < 3 or np.all(np.diff(deltas) == 0)):
        return None
    ewma = ewma_chart(deltas, target=target, sigma=sigma, lam=EWMA_LAMBDA, L=EWMA_L)
    cusum = cusum_chart(deltas, target=target, sigma=sigma, k=CUSUM_K, h=CUSUM_H)
    return _Control(
        ewma=ewma.statistic, lower=ewma.lower_limit, upper=ewma.upper_limit,
        alarms=frozenset(ewma.alarms) | frozenset(cusum.alarms), sigma_note=note,
        alarm_note=f"{_first_alarm_text('EWMA', ewma.alarms, series)}; "
                   f"{_first_alarm_text('CUSUM', cusum.alarms, series)}")


def _polyline(xs: list[float], ys: list[float]) -> str:
    return " ".join(f"{x:.2f},{y:.2f}" for x, y in zip(xs, ys))


def task_chart(task: str, series: tuple[SeriesPoint, ...], golden_delta: float | None,
               golden_run_id: str | None) -> TaskChart:
    """The chart of one task's series (oldest run first)."""
    target = golden_delta if golden_delta is not None else 0.0
    target_note = (f"target: the delta of golden run {golden_run_id}, {fmt.points(target)} pts"
                   if golden_delta is not None else "target: 0 (no golden run pinned)")
    control = _control(series, target) if series else None
    values = [0.0, target * 100]
    for p in series:
        values += [v * 100 for v in (p.delta, p.ci_low, p.ci_high) if fmt.finite(v)]
    if control is not None:
        values += list(control.lower * 100) + list(control.upper * 100)
    low, high = min(values), max(values)
    pad = max((high - low) * 0.06, 0.25)
    step = _nice_step(high - low + 2 * pad, target_ticks=5)
    low, high = math.floor((low - pad) / step) * step, math.ceil((high + pad) / step) * step
    top, bottom = float(TOP), float(HEIGHT - BOTTOM)
    left, right = float(LEFT), float(WIDTH - RIGHT)
    slot = (right - left) / max(len(series), 1)

    def y(value: float) -> float:
        return round(top + (high - value * 100) / (high - low) * (bottom - top), 2)

    def y_or_none(value) -> float | None:
        return y(value) if fmt.finite(value) else None

    xs = [round(left + slot * (i + 0.5), 2) for i in range(len(series))]
    alarms = control.alarms if control else frozenset()
    points = tuple(ChartPoint(
        run_id=p.run_id, x=xs[i], y=y(p.delta), y_low=y_or_none(p.ci_low),
        y_high=y_or_none(p.ci_high), golden=p.golden, alarm=i in alarms,
        tooltip=(f"{p.run_id} ({_date(p.created)}): delta {fmt.points(p.delta)} pts "
                 f"{fmt.points_interval(p.ci_low, p.ci_high)}, n={p.n}, {p.verdict or '?'}"
                 + (", golden" if p.golden else "") + (", ALARM" if i in alarms else "")))
        for i, p in enumerate(series))
    n_ticks = int(round((high - low) / step))
    y_ticks = tuple(Tick(y(v / 100), "0" if abs(v) < step / 1000 else f"{v:+g}")
                    for v in (low + k * step for k in range(n_ticks + 1)))
    every = max(1, math.ceil(len(series) / MAX_DATE_LABELS))
    x_labels = tuple(Tick(xs[i], series[i].created[:10]) for i in range(0, len(series), every))
    return TaskChart(
        task=task, metric=series[-1].metric if series else "", width=WIDTH, height=HEIGHT,
        plot_left=left, plot_right=right, plot_top=top, plot_bottom=bottom, points=points,
        ewma_line=_polyline(xs, [y(v) for v in control.ewma]) if control else "",
        upper_line=_polyline(xs, [y(v) for v in control.upper]) if control else "",
        lower_line=_polyline(xs, [y(v) for v in control.lower]) if control else "",
        target_y=y(target) if control else None, zero_y=y(0.0), y_ticks=y_ticks,
        x_labels=x_labels,
        sigma_note=control.sigma_note if control else "not charted: too few runs to estimate "
                                                         "the spread",
        alarm_note=control.alarm_note if control else "", target_note=target_note)
