"""Geometry of the forest plot: one row per task, its delta and interval, the margin line.

Everything is computed here in SVG user units; the template only places the shapes.
The x axis is in percentage points so it reads like the summary table.
"""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.run_record_model import RunRecord
from evals.report import _formatting as fmt
from evals.report._summary_rows import verdict_class
from evals.report._svg_axis import Axis

WIDTH = 760
LABEL_WIDTH = 210
VALUE_WIDTH = 170
ROW_HEIGHT = 26
TOP = 14
AXIS_HEIGHT = 40


@dataclass(frozen=True, slots=True)
class ForestRow:
    label: str
    gated: bool
    y: float
    text_y: float
    cap_top: float
    cap_bottom: float
    x_point: float | None
    x_low: float | None
    x_high: float | None
    value: str
    verdict_class: str


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class ForestPlot:
    width: int
    height: int
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    label_x: float
    value_x: float
    tick_y: float
    margin_label_y: float
    zero_x: float
    margin_x: float
    margin_label: str
    rows: tuple[ForestRow, ...]
    ticks: tuple[Tick, ...]


def forest_plot(summary: RunRecord) -> ForestPlot:
    tasks = summary.tasks
    margin_pts = summary.gate.margin * 100
    values = [-margin_pts, 0.0]
    for t in tasks:
        values += [v * 100 for v in (t.delta, t.ci_low, t.ci_high) if fmt.finite(v)]
    left, right = float(LABEL_WIDTH), float(WIDTH - VALUE_WIDTH)
    axis = Axis.fit(values, start=left, end=right, pad_share=0.08, min_pad=0.5)
    x = axis.position

    def x_of(value) -> float | None:
        return x(value * 100) if fmt.finite(value) else None

    rows = []
    for i, t in enumerate(tasks):
        y = TOP + ROW_HEIGHT * (i + 0.5)
        rows.append(ForestRow(
            label=t.task, gated=t.gated,
            y=y, text_y=y + 4, cap_top=y - 5, cap_bottom=y + 5, x_point=x_of(t.delta),
            x_low=x_of(t.ci_low), x_high=x_of(t.ci_high),
            value=f"{fmt.points(t.delta)} {fmt.points_interval(t.ci_low, t.ci_high)}",
            verdict_class=verdict_class(t.verdict)))
    bottom = TOP + ROW_HEIGHT * max(len(tasks), 1)
    ticks = tuple(Tick(position, label) for position, label in axis.ticks())
    return ForestPlot(
        width=WIDTH, height=int(bottom + AXIS_HEIGHT), plot_left=left, plot_right=right,
        plot_top=TOP / 2, plot_bottom=bottom, tick_y=bottom + 16, margin_label_y=bottom + 32,
        label_x=left - 10, value_x=right + 10,
        zero_x=x(0.0), margin_x=x(-margin_pts), margin_label=f"margin -{margin_pts:g} pts",
        rows=tuple(rows), ticks=ticks)
