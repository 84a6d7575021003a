"""The items whose score changed between the arms, as embedded in the report.

Order: per task, items that got worse (correct -> wrong) first, then items that got
better. The report embeds at most `max_flipped_items` per run and at most
`ITEM_BYTES_BUDGET` bytes of escaped text, so it stays small when thousands of items
flip. Worse items are chosen before better ones, and within each direction the
tasks take turns, so one large task cannot crowd out the others. Long texts are cut
to a window (a prompt's end holds the question; a response's window starts just
before the arms diverge), and every cut is stated on the page.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from dataclasses import dataclass
from itertools import chain, zip_longest

from evals.record.paired_item import PairedItem, as_items
from evals.record.run_record_model import RunRecord
from evals.report._text_diff import Segment, diff_segments

PROMPT_TAIL_CHARS = 3000
RESPONSE_CHARS = 4000
RESPONSE_CONTEXT_CHARS = 800
TARGET_CHARS = 1000
ITEM_BYTES_BUDGET = 3_000_000
ITEM_MARKUP_BYTES = 1200  # tags and attributes around one item's text, generously

WORSE, BETTER = "c2w", "w2c"


@dataclass(frozen=True, slots=True)
class ClippedText:
    text: str
    shown: int
    omitted_before: int
    omitted_after: int


@dataclass(frozen=True, slots=True)
class FlippedItem:
    task: str
    doc_id: str
    direction: str
    direction_label: str
    scores: str
    prompt: ClippedText
    target: ClippedText
    baseline_prediction: str
    candidate_prediction: str
    baseline_segments: tuple[Segment, ...]
    candidate_segments: tuple[Segment, ...]
    response_omitted_before: int
    baseline_omitted_after: int
    candidate_omitted_after: int


@dataclass(frozen=True, slots=True)
class TaskFlipCount:
    task: str
    worse_total: int
    worse_shown: int
    better_total: int
    better_shown: int


@dataclass(frozen=True, slots=True)
class FlippedItems:
    items: tuple[FlippedItem, ...]
    counts: tuple[TaskFlipCount, ...]
    tasks: tuple[str, ...]
    total: int
    shown: int
    left_out: int
    max_items: int
    budget_reached: bool
    items_file_found: bool


def _clip_head(text: str, limit: int) -> ClippedText:
    return ClippedText(text[:limit], min(len(text), limit), 0, max(len(text) - limit, 0))


def _clip_tail(text: str, limit: int) -> ClippedText:
    return ClippedText(text[-limit:] if len(text) > limit else text, min(len(text), limit),
                       max(len(text) - limit, 0), 0)


def _common_prefix_chars(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _direction_labels(binary: bool) -> dict[str, str]:
    if binary:
        return {WORSE: "correct \u2192 wrong", BETTER: "wrong \u2192 correct"}
    return {WORSE: "scored lower", BETTER: "scored higher"}


def _score(x) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


def _build_item(row: PairedItem, direction: str, label: str) -> FlippedItem:
    base, cand = str(row.baseline_response or ""), str(row.candidate_response or "")
    start = 0
    if max(len(base), len(cand)) > RESPONSE_CHARS:
        start = max(_common_prefix_chars(base, cand) - RESPONSE_CONTEXT_CHARS, 0)
    base_w, cand_w = base[start:start + RESPONSE_CHARS], cand[start:start + RESPONSE_CHARS]
    seg_b, seg_c = diff_segments(base_w, cand_w)
    return FlippedItem(
        task=row.task or "", doc_id="" if row.doc_id is None else str(row.doc_id),
        direction=direction, direction_label=label,
        scores=f"{row.metric or 'score'}: {_score(row.baseline)} \u2192 "
               f"{_score(row.candidate)}",
        prompt=_clip_tail(str(row.prompt or ""), PROMPT_TAIL_CHARS),
        target=_clip_head(str(row.target or ""), TARGET_CHARS),
        baseline_prediction=str(row.baseline_prediction or "")[:TARGET_CHARS],
        candidate_prediction=str(row.candidate_prediction or "")[:TARGET_CHARS],
        baseline_segments=seg_b, candidate_segments=seg_c, response_omitted_before=start,
        baseline_omitted_after=len(base) - start - len(base_w),
        candidate_omitted_after=len(cand) - start - len(cand_w))


def _escaped_bytes(text: str) -> int:
    return len(html.escape(text).encode("utf-8"))


def _item_bytes(item: FlippedItem) -> int:
    texts = chain((item.prompt.text, item.target.text, item.baseline_prediction,
                   item.candidate_prediction, item.task, item.task),
                  (s.text for s in item.baseline_segments),
                  (s.text for s in item.candidate_segments))
    spans = len(item.baseline_segments) + len(item.candidate_segments)
    return sum(_escaped_bytes(t) for t in texts) + ITEM_MARKUP_BYTES + 16 * spans


def _doc_order(row: PairedItem) -> tuple[int, int, str]:
    doc_id = row.doc_id
    return (0, doc_id, "") if isinstance(doc_id, int) else (1, 0, str(doc_id))


def _round_robin(groups: list[list]) -> list:
    return [x for batch in zip_longest(*groups) for x in batch if x is not None]


def flipped_items(summary: RunRecord, rows: list[PairedItem] | list[dict], max_items: int,
                  items_file_found: bool = True) -> FlippedItems:
    """The changed items to show, worse first, within `max_items` and the page's byte
    budget; `rows` are the run's paired items (parsed lines are read as PairedItems)."""
    rows = as_items(rows)
    tasks = [t.task for t in summary.tasks]
    binary = {t.task: t.binary is not False for t in summary.tasks}  # unknown: shown as 0/1
    by_task: dict[str, dict[str, list[PairedItem]]] = defaultdict(
        lambda: {WORSE: [], BETTER: []})
    for row in rows:
        b, c = row.baseline, row.candidate
        if not (isinstance(b, (int, float)) and isinstance(c, (int, float))
                and math.isfinite(b) and math.isfinite(c)) or b == c:
            continue
        by_task[str(row.task)][WORSE if c < b else BETTER].append(row)
    tasks += sorted(t for t in by_task if t not in tasks)  # items of a task the summary lacks
    for groups in by_task.values():
        # largest change first, then by document
        groups[WORSE].sort(key=lambda r: (r.candidate - r.baseline, _doc_order(r)))
        groups[BETTER].sort(key=lambda r: (r.baseline - r.candidate, _doc_order(r)))
    # priority: every task's worse items in turns, then every task's better items in turns
    queue = [(d, row) for d in (WORSE, BETTER)
             for row in _round_robin([by_task[t][d] for t in tasks if t in by_task])]
    chosen: dict[int, FlippedItem] = {}
    used, budget_reached = 0, False
    for direction, row in queue:
        if len(chosen) >= max_items:
            break
        item = _build_item(row, direction,
                           _direction_labels(binary.get(str(row.task), True))[direction])
        size = _item_bytes(item)
        if used + size > ITEM_BYTES_BUDGET:
            budget_reached = True
            break
        used += size
        chosen[id(row)] = item
    items, counts = [], []
    for task in tasks:
        groups = by_task.get(task, {WORSE: [], BETTER: []})
        shown = {}
        for d in (WORSE, BETTER):
            picked = [chosen[id(r)] for r in groups[d] if id(r) in chosen]
            items += picked
            shown[d] = len(picked)
        counts.append(TaskFlipCount(task, len(groups[WORSE]), shown[WORSE],
                                    len(groups[BETTER]), shown[BETTER]))
    total = sum(c.worse_total + c.better_total for c in counts)
    return FlippedItems(items=tuple(items), counts=tuple(counts), tasks=tuple(tasks),
                        total=total, shown=len(items), left_out=total - len(items),
                        max_items=max_items, budget_reached=budget_reached,
                        items_file_found=items_file_found)
