"""One-sided evidence, per task: forward flips (baseline right, candidate wrong) against the
reverse flips (baseline wrong, candidate right) and the A/A flips of the baseline's rerun
(`noise_floor: true`), side by side.

Batch nondeterminism flips answers both ways, about as often as an A/A rerun does; a
corrupted cache flips them one way (vLLM #43559: right without the cache, wrong with it).
vLLM's regression test for that bug (tests/v1/e2e/test_hybrid_mamba_prefix_cache_
correctness.py) reads forward flips beyond the reverse ones plus a margin of 2 as
one-sided; the same reading is shown here beside the numbers. It is a description for
the reader; the verdict comes from the gate's one-sided test, not from this reading.
"""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.run_record_model import RunRecord

FLIP_MARGIN = 2
"""Forward flips allowed beyond the reverse ones before a task reads as one-sided."""


@dataclass(frozen=True, slots=True)
class OneSidedRow:
    task: str
    n: int | None
    forward: int  # baseline right, candidate wrong
    reverse: int  # baseline wrong, candidate right
    aa_flips: str  # the baseline A/A rerun's changed items, or why there are none
    reading: str
    css: str  # worse | better | "" (the verdict colours of the task table)


@dataclass(frozen=True, slots=True)
class OneSidedSection:
    rows: tuple[OneSidedRow, ...]
    margin: int
    aa_run: bool


def reading(forward: int, reverse: int, aa_flips: int | None) -> tuple[str, str]:
    """The reading of one task's flips and its CSS class."""
    if forward + reverse == 0:
        return "no flips", ""
    if forward > reverse + FLIP_MARGIN:
        beyond = f"one-sided: {forward - reverse} more forward than reverse flips"
        if aa_flips is not None and forward <= aa_flips:
            return f"{beyond}, but no more than the A/A rerun's {aa_flips} flips", "worse"
        return beyond, "worse"
    if reverse > forward + FLIP_MARGIN:
        return f"one-sided the other way: {reverse - forward} more reverse flips", "better"
    return f"both ways (within {FLIP_MARGIN}), as batch nondeterminism flips", ""


def one_sided_section(summary: RunRecord) -> OneSidedSection | None:
    """The binary tasks' flips; None when no task has paired 0/1 flips to show."""
    rows, aa_run = [], False
    for t in summary.tasks:
        if not t.binary or t.correct_to_wrong is None or t.wrong_to_correct is None:
            continue  # a continuous metric moves by degrees, it does not flip
        aa_run = aa_run or t.noise_flips is not None
        text, css = reading(t.correct_to_wrong, t.wrong_to_correct, t.noise_flips)
        rows.append(OneSidedRow(
            task=t.task, n=t.n, forward=t.correct_to_wrong, reverse=t.wrong_to_correct,
            aa_flips=str(t.noise_flips) if t.noise_flips is not None else "not run",
            reading=text, css=css))
    if not rows:
        return None
    return OneSidedSection(rows=tuple(rows), margin=FLIP_MARGIN, aa_run=aa_run)
