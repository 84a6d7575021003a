"""One-sided evidence, per task: forward flips (baseline right, candidate wrong) against the
reverse flips (baseline wrong, candidate right) and the A/A flips of the baseline's rerun
(`noise_floor: true`), side by side.

Batch nondeterminism flips answers both ways, about as often as an A/A rerun does; a
corrupted cache flips them one way (vLLM #43559: right without the cache, wrong with it).
vLLM's regression test for that bug (tests/v1/e2e/test_hybrid_mamba_prefix_cache_
correctness.py) reads forward flips beyond the reverse ones plus a margin of 2 as
one-sided; the same reading is shown here beside the numbers. It is a description for
the reader; the verdict comes from the gate's one-sided test, not from this reading.

Beside the flips, the shape of every changed output (issue 54): a response that is the
other arm's with one piece of text added (vLLM #53919's async-scheduling overrun: the
baseline's answer with one more token, at its end or repeated inside it, as the H200 study
recorded; a response cut at the generation budget loses as much at its end, as in the H100
recall runs) or a response rewritten otherwise (what a corrupted recurrent state or cache
hit does, #43559). A run with async scheduling off beside one with it on tells the two
mechanisms apart, and the section says which this run is (each arm's async scheduling as
vLLM resolved it): where both arms had it off, no flip can be the async race.

A task sent in waves (tasks/recall) tells them apart within one run as well: the
candidate's record keeps each wave's doc ids and vLLM's prefix-cache hits, and a forward
flip in a wave that hit no cached token cannot be a cache-hit corruption.
"""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.paired_item import PairedItem
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
    changes: str  # the changed outputs by shape, or "-" when no responses were recorded
    uncached: str  # forward flips in the candidate's waves with no cache hit, "N of M", or "-"


@dataclass(frozen=True, slots=True)
class OneSidedSection:
    rows: tuple[OneSidedRow, ...]
    margin: int
    aa_run: bool
    async_note: str  # what the arms' async scheduling says about the flips; "" if unknown


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


ASYNC_FIELD = "scheduler.async_scheduling"


def async_note(summary: RunRecord) -> str:
    """Which mechanisms the flips can come from, by the baseline's and the candidate's
    async scheduling as vLLM resolved it; "" when an arm did not record it."""
    arms = [summary.arms.get(role) for role in ("baseline", "candidate")]
    values = [(a.effective_engine_config or {}).get(ASYNC_FIELD) if a else None for a in arms]
    if not all(isinstance(v, bool) for v in values):
        return ""
    if not any(values):
        return ("Async scheduling was off in both arms (as vLLM resolved them): no flip here "
                "is the async-scheduling race (vLLM #53919).")
    where = "both arms" if all(values) else ("the baseline" if values[0] else "the candidate")
    return (f"Async scheduling was on in {where}: the async-scheduling race (vLLM #53919) "
            "can change outputs as well as a cache-hit corruption (#43559); a run with "
            "async_scheduling: false tells the two apart.")


@dataclass(frozen=True, slots=True)
class OutputChanges:
    """A task's items whose responses differ between the arms, by shape."""

    changed: int
    added: int  # one response is the other with one piece of text added
    rewritten: int  # the rest

    @property
    def text(self) -> str:
        if not self.changed:
            return "0"
        return f"{self.changed}: {self.added} text added, {self.rewritten} rewritten"


def one_piece_added(a: str, b: str) -> bool:
    """Whether one of `a` and `b` is the other with one piece of text inserted (appended,
    prepended or inside). A response cut at the generation budget loses at its end as many
    tokens as the piece added, so the one with the piece may stop short of the other's end;
    what it keeps of the other after the piece must then be at least as long as what it
    lost (an H100 recall run's ' 7743' + newline + 'Q: vaul' against ' 77743' + newline +
    'Q: va': one token inserted, one cut)."""
    return a != b and (_with_piece(a, b) or _with_piece(b, a))


def _with_piece(base: str, other: str) -> bool:
    """`other` is base[:p] + piece + base[p:p + kept], the piece not empty, p the length of
    their common prefix, and what is cut from base's end at most `kept` (0 when nothing is
    kept: an appended piece)."""
    p = 0
    while p < min(len(base), len(other)) and base[p] == other[p]:
        p += 1
    rest = base[p:]
    for start in range(p + 1, len(other) + 1):
        kept = len(other) - start
        cut = len(rest) - kept
        if kept >= cut and rest.startswith(other[start:]):
            return True
    return False


def _responses(value) -> list[str] | None:
    """One arm's response(s) of an item: a sampled item has one per repeat."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def output_changes(rows: list[PairedItem]) -> dict[str, OutputChanges]:
    """Per task, the items whose responses differ: text added (in every differing pair of
    responses one is the other with one piece inserted) or rewritten. Tasks whose items
    recorded no responses are left out."""
    counts: dict[str, list[int]] = {}
    for row in rows:
        base, cand = _responses(row.baseline_response), _responses(row.candidate_response)
        if row.task is None or base is None or cand is None or len(base) != len(cand):
            continue
        tally = counts.setdefault(row.task, [0, 0, 0])
        pairs = [(b, c) for b, c in zip(base, cand) if b != c]
        if not pairs:
            continue
        tally[0] += 1
        tally[1 if all(one_piece_added(b, c) for b, c in pairs) else 2] += 1
    return {task: OutputChanges(*tally) for task, tally in counts.items()}


HITS = "vllm:prefix_cache_hits"


def uncached_doc_ids(waves: list[dict] | None) -> set | None:
    """The doc ids of the waves in which the arm hit no cached prompt token; None when the
    task ran in no waves or a wave lacks its doc ids or its hit counter (an older record,
    a backend without vLLM's counters)."""
    if not waves:
        return None
    uncached = set()
    for wave in waves:
        doc_ids, hits = wave.get("doc_ids"), (wave.get("exercise") or {}).get(HITS)
        if not isinstance(doc_ids, list) or not isinstance(hits, (int, float)):
            return None
        if hits == 0:
            uncached.update(doc_ids)
    return uncached


def uncached_forward(summary: RunRecord, items: list[PairedItem]) -> dict[str, str]:
    """Per waved task, "N of M": N of its M forward flips fell in a wave in which the
    candidate hit no cached token (so no cache hit changed them)."""
    arm = summary.arms.get("candidate")
    out: dict[str, str] = {}
    for task, record in ((arm.tasks or {}) if arm else {}).items():
        uncached = uncached_doc_ids(record.waves)
        if uncached is None:
            continue
        forward = [i for i in items if i.task == task and i.baseline == 1 and i.candidate == 0]
        out[task] = f"{sum(i.doc_id in uncached for i in forward)} of {len(forward)}"
    return out


def one_sided_section(summary: RunRecord, items: list[PairedItem] | None = None
                      ) -> OneSidedSection | None:
    """The binary tasks' flips, with the shapes of their changed outputs when `items` (the
    run's paired items) are given; None when no task has paired 0/1 flips to show."""
    changes = output_changes(items or [])
    uncached = uncached_forward(summary, items) if items else {}
    rows, aa_run = [], False
    for t in summary.tasks:
        if not t.binary or t.correct_to_wrong is None or t.wrong_to_correct is None:
            continue  # a continuous metric moves by degrees, it does not flip
        aa_run = aa_run or t.noise_flips is not None
        text, css = reading(t.correct_to_wrong, t.wrong_to_correct, t.noise_flips)
        rows.append(OneSidedRow(
            task=t.task, n=t.n, forward=t.correct_to_wrong, reverse=t.wrong_to_correct,
            aa_flips=str(t.noise_flips) if t.noise_flips is not None else "not run",
            reading=text, css=css,
            changes=changes[t.task].text if t.task in changes else "-",
            uncached=uncached.get(t.task, "-")))
    if not rows:
        return None
    return OneSidedSection(rows=tuple(rows), margin=FLIP_MARGIN, aa_run=aa_run,
                           async_note=async_note(summary))
