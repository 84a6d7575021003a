"""Geometry of the per-item rate differences of sampled tasks (issue 53, `repeats: k`).

A sampled task is decided on its items' pass rates over k repeats; what moved is how
the candidate's rate of each item differs from the baseline's. With k repeats a difference
is a multiple of 1/k between -1 and +1, so per task a histogram over those 2k + 1 values
reads at a glance where a table of items would not: a bar left of zero counts items whose
rate fell, right of zero items whose rate rose, and an A/A under per-request seeds puts
every item on zero. The values come from paired_items.jsonl (the rates the analysis
tested, evals.pair.repeats.with_rates); the items themselves, with every sample of both
arms, are in the changed-items section.

Everything is computed here in SVG user units; the template only places the shapes (with
presentation attributes, which the report's content security policy allows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evals.record.paired_item import PairedItem, as_items
from evals.record.run_record_model import RunRecord

WIDTH = 760
HEIGHT = 170
LEFT, RIGHT = 48.0, 740.0
TOP, BOTTOM = 12.0, 130.0
FALL, SAME, RISE = "fall", "same", "rise"
COLOURS = {FALL: "#cf222e", SAME: "#818b98", RISE: "#1a7f37"}


@dataclass(frozen=True, slots=True)
class RateBar:
    difference: str
    """The rate difference this bar counts, in percentage points ('-25', '0', '+12.5')."""
    count: int
    kind: str
    colour: str
    x: float
    width: float
    y: float
    height: float


@dataclass(frozen=True, slots=True)
class RateTick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class RateHistogram:
    task: str
    repeats: int
    items: int
    fell: int
    rose: int
    mean: str
    """The mean rate difference, in signed percentage points."""
    bars: tuple[RateBar, ...]
    ticks: tuple[RateTick, ...]
    count_ticks: tuple[tuple[float, int], ...]
    """(y, count) of the count axis's labels."""
    width: int = WIDTH
    height: int = HEIGHT
    plot_left: float = LEFT
    plot_right: float = RIGHT
    plot_top: float = TOP
    plot_bottom: float = BOTTOM
    tick_y: float = BOTTOM + 16
    title_y: float = BOTTOM + 34


@dataclass(frozen=True, slots=True)
class RatePlots:
    histograms: tuple[RateHistogram, ...]


def _points(value: float) -> str:
    rounded = round(value * 100, 1)
    return "0" if rounded == 0 else f"{rounded:+g}"


def _differences(rows: list[PairedItem], task: str) -> list[float]:
    out = []
    for row in rows:
        b, c = row.baseline, row.candidate
        if str(row.task) == task and isinstance(b, (int, float)) \
                and isinstance(c, (int, float)) and math.isfinite(b) and math.isfinite(c):
            out.append(float(c) - float(b))
    return out


def rate_histogram(task: str, repeats: int, differences: list[float]) -> RateHistogram:
    """Histogram of one task's per-item rate differences over the 2k + 1 possible values."""
    k = max(int(repeats), 1)
    counts = [0] * (2 * k + 1)
    for d in differences:
        counts[min(max(int(round(d * k)), -k), k) + k] += 1
    slot = (RIGHT - LEFT) / (2 * k + 1)
    top_count = max(max(counts), 1)
    bars = []
    for j, count in enumerate(counts):
        step = j - k
        kind = FALL if step < 0 else RISE if step > 0 else SAME
        height = round((BOTTOM - TOP) * count / top_count, 2)
        bars.append(RateBar(difference=_points(step / k), count=count, kind=kind,
                            colour=COLOURS[kind], x=round(LEFT + j * slot + slot * 0.1, 2),
                            width=round(slot * 0.8, 2), y=round(BOTTOM - height, 2),
                            height=height))
    label_every = max(1, math.ceil((2 * k + 1) / 9))  # at most about 9 labels
    ticks = tuple(RateTick(round(LEFT + (j + 0.5) * slot, 2), bars[j].difference)
                  for j in range(2 * k + 1) if (j - k) % label_every == 0)
    count_ticks = tuple((round(BOTTOM - (BOTTOM - TOP) * c / top_count, 2), c)
                        for c in sorted({0, top_count}))
    mean = sum(differences) / len(differences) if differences else 0.0
    return RateHistogram(task=task, repeats=k, items=len(differences),
                         fell=sum(counts[:k]), rose=sum(counts[k + 1:]), mean=_points(mean),
                         bars=tuple(bars), ticks=ticks, count_ticks=count_ticks)


def rate_plots(summary: RunRecord, rows: list[PairedItem] | list[dict]) -> RatePlots:
    """One histogram per sampled task (a task whose record has `repeats`), in task order."""
    rows = as_items(rows)
    return RatePlots(tuple(
        rate_histogram(t.task, t.repeats.repeats, _differences(rows, t.task))
        for t in summary.tasks if t.repeats is not None))
