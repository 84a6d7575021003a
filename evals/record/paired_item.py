"""One line of a run's paired_items.jsonl as a typed item: the report's changed items and
rate plots read these attributes, not the row. A field an older file lacks reads as None.
The row itself stays what `evals.record.run_record.read_paired_items` returns (the store
keeps every column of it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

from evals.record.run_record import read_paired_items

Text = Union[str, int, float, list, dict, None]
"""lm-eval's target or prediction: usually text, sometimes a number or a list."""


@dataclass(frozen=True, slots=True)
class PairedItem:
    """One paired item: both arms' scores, the prompt, target, predictions and responses."""

    task: str | None
    doc_id: int | str | None
    metric: str | None
    baseline: float | None
    """The baseline's score (a sampled task: its pass rate over the repeats)."""
    candidate: float | None
    target: Text
    prompt: Text
    baseline_prediction: Text
    candidate_prediction: Text
    baseline_response: Text
    candidate_response: Text

    @classmethod
    def from_row(cls, row: dict) -> PairedItem:
        """The item of one parsed line (written by evals.record.run_record.write_paired_items)."""
        def number(key):
            value = row.get(key)
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) \
                else None

        task = row.get("task")
        return cls(task=None if task is None else str(task), doc_id=row.get("doc_id"),
                   metric=row.get("metric"), baseline=number("baseline"),
                   candidate=number("candidate"), target=row.get("target"),
                   prompt=row.get("prompt"),
                   baseline_prediction=row.get("baseline_prediction"),
                   candidate_prediction=row.get("candidate_prediction"),
                   baseline_response=row.get("baseline_response"),
                   candidate_response=row.get("candidate_response"))


def as_items(rows: list[PairedItem] | list[dict]) -> list[PairedItem]:
    """`rows` as typed items (parsed lines are turned into items once)."""
    return [r if isinstance(r, PairedItem) else PairedItem.from_row(r) for r in rows]


def read_paired_item_records(run_dir: Path) -> list[PairedItem]:
    """The typed reader of paired_items.jsonl (its version checked by read_paired_items)."""
    return as_items(read_paired_items(run_dir))
