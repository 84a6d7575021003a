"""The whole report as plain data: one view-model per section, built from the stored run."""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.paired_item import PairedItem, as_items
from evals.record.run_record_model import RunRecord
from evals.report._arms import ArmsSection, arms_section
from evals.report._exercise import ExerciseSection, exercise_section
from evals.report._flip_analysis import TaskFlips, task_flips
from evals.report._flipped_items import FlippedItems, flipped_items
from evals.report._forest_plot import ForestPlot, forest_plot
from evals.report._load_curve import LoadCurveSection, load_curve_section
from evals.report._method import MethodSection, method_section
from evals.report._one_sided import OneSidedSection, one_sided_section
from evals.report._rate_plot import RatePlots, rate_plots
from evals.report._shift import ShiftSection, shift_section
from evals.report._speed import SpeedSection, speed_section
from evals.report._summary_rows import Banner, TaskRow, banner, task_rows


@dataclass(frozen=True, slots=True)
class ReportPage:
    title: str
    banner: Banner
    rows: tuple[TaskRow, ...]
    forest: ForestPlot
    flips: tuple[TaskFlips, ...]
    one_sided: OneSidedSection | None
    rates: RatePlots
    items: FlippedItems
    speed: SpeedSection | None
    load_curve: LoadCurveSection | None
    exercise: ExerciseSection | None
    shift: ShiftSection
    arms: ArmsSection
    method: MethodSection


def build_page(summary: RunRecord, rows: list[PairedItem] | list[dict],
               max_flipped_items: int, items_file_found: bool = True) -> ReportPage:
    """The page's view-model from the run's record and its paired items."""
    top = banner(summary)
    rows = as_items(rows)
    return ReportPage(
        title=f"{top.verdict} \u2013 {top.run_id} \u2013 vllm-regression-evals",
        banner=top, rows=task_rows(summary), forest=forest_plot(summary),
        flips=task_flips(summary), one_sided=one_sided_section(summary, rows),
        rates=rate_plots(summary, rows),
        items=flipped_items(summary, rows, max_flipped_items, items_file_found),
        speed=speed_section(summary), load_curve=load_curve_section(summary),
        exercise=exercise_section(summary.exercise, summary.faults),
        shift=shift_section(summary),
        arms=arms_section(summary), method=method_section(summary))
