"""The distribution shift of one task: how far the candidate moved the baseline's
next-token (or choice) distributions, whether more than an A/A rerun does, and which
items were prone to flip (evals.stats.divergence holds the statistics).

Generation tasks need both arms' per-token top-k log-probabilities (the config's
`logprobs: k`); multiple-choice tasks use the per-choice log-likelihoods lm-eval logs in
every samples file, so `compare` on plain `--log_samples` directories has them too. The
shift test needs the baseline's A/A rerun (`noise_floor: true`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from evals.errors import UserError
from evals.pair.logprobs import TaskLogprobs
from evals.pair.pairing import PairedTask
from evals.stats.divergence import (NEAR_TIE_NATS, DivergenceSummary, ItemDivergence,
                                    ShiftTestResult, choice_divergence, flip_rates_by_margin,
                                    generation_divergence, shift_test, summarize)
from evals.stats.multiple import holm
from evals.stats.intervals import DEFAULT_CONFIDENCE_LEVEL

FLIP_PRONE_SHOWN = 12


@dataclass(frozen=True, slots=True)
class FlipProneItem:
    doc_id: int
    margin: float
    """The baseline's smallest top-1 minus top-2 log-probability (nats)."""
    near_tie: bool
    """margin <= NEAR_TIE_NATS: a flip here is within bf16 rounding."""
    flip: str
    """"correct->wrong", "wrong->correct", "changed" (a non-0/1 score) or "" (no flip)."""
    mean_kl: float
    first_divergence: int | None


@dataclass(frozen=True, slots=True)
class ShiftAnalysis:
    task: str
    kind: str
    """"generation" (per-token top-k) or "choice" (per-choice log-likelihoods)."""
    top_k: int | None
    summary: DivergenceSummary
    test: ShiftTestResult | None
    test_note: str
    """Why there is no test (no A/A rerun), or ""."""
    strata: tuple[tuple[str, int, int], ...]
    """(baseline-margin stratum, items, items whose score changed)."""
    flips: int
    near_tie_flips: int
    """Flips whose baseline margin was a near tie (within bf16 rounding)."""
    flip_prone: tuple[FlipProneItem, ...]
    """The items of lowest baseline margin, lowest first."""
    missing: int
    """Paired items without the data in one of the arms."""
    pvalue_adjusted: float | None = None
    """The test's p-value, Holm-adjusted over the run's tested tasks."""


def _flip(base: float, cand: float, binary: bool) -> str:
    if base == cand:
        return ""
    if not binary:
        return "changed"
    return "correct->wrong" if base > cand else "wrong->correct"


def generation_items(p: PairedTask, base: TaskLogprobs, other: TaskLogprobs
                      ) -> dict[int, ItemDivergence]:
    items = {}
    for doc_id in p.doc_ids:
        b, c = base.items.get(doc_id), other.items.get(doc_id)
        if b is not None and c is not None:
            items[doc_id] = generation_divergence(b.tokens, b.top, c.tokens, c.top)
    return items


def choice_items(p: PairedTask) -> dict[int, ItemDivergence]:
    items = {}
    for doc_id, rb, rc in zip(p.doc_ids, p.baseline_records, p.candidate_records):
        if len(rb.choice_logliks) >= 2 and len(rb.choice_logliks) == len(rc.choice_logliks):
            items[doc_id] = choice_divergence(rb.choice_logliks, rc.choice_logliks)
    return items


def check_top_k(task: str, logprobs: dict[str, TaskLogprobs | None]) -> None:
    """Arms that recorded different top-k cannot be compared: bad input naming them."""
    ks = {arm: lp.top_k for arm, lp in logprobs.items() if lp is not None}
    if len(set(ks.values())) > 1:
        shown = ", ".join(f"{arm} top_k={k}" for arm, k in ks.items())
        raise UserError(f"task {task}: the arms recorded different numbers of top "
                        f"log-probabilities ({shown}); rerun them with one `logprobs:`.")


def analyse_shift(p: PairedTask, *, baseline: TaskLogprobs | None = None,
                  candidate: TaskLogprobs | None = None, rerun: TaskLogprobs | None = None,
                  rerun_paired: PairedTask | None = None, seed_rng: np.random.Generator,
                  margin: float, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL) -> ShiftAnalysis | str:
    """The task's shift analysis, or a sentence saying why there is none."""
    check_top_k(p.task, {"baseline": baseline, "candidate": candidate, "rerun": rerun})
    kind, top_k = "generation", None
    if baseline is not None and candidate is not None and baseline.items and candidate.items:
        items = generation_items(p, baseline, candidate)
        top_k = baseline.top_k
        noise = (generation_items(p, baseline, rerun) if rerun is not None
                 else None)
    else:
        kind = "choice"
        items = choice_items(p)
        noise = choice_items(rerun_paired) if rerun_paired is not None else None
    if not items:
        if any(r.choice_logliks for r in p.baseline_records):
            return "the arms' choice log-likelihoods do not line up"
        return ("no per-token log-probabilities: set `logprobs: k` (e.g. 5) in the config "
                "(offline arms); lm-eval's plain samples hold them for multiple choice only")
    binary = p.is_binary
    index = {d: i for i, d in enumerate(p.doc_ids)}
    flips = {d: _flip(float(p.baseline[index[d]]), float(p.candidate[index[d]]), binary)
             for d in items}
    test, note = None, ""
    if noise is None:
        note = ("no A/A rerun of the baseline (`noise_floor: true`): the shift cannot be told "
                "from engine noise, so it is described, not tested")
    else:
        shared = [d for d in items if d in noise]
        if len(shared) < 2:
            note = "the A/A rerun has too few items with the data"
        else:
            test = shift_test([items[d].mean_kl for d in shared],
                              [noise[d].mean_kl for d in shared], rng=seed_rng,
                              margin=margin, confidence_level=confidence_level)
    margins = {d: it.margin for d, it in items.items()}
    order = sorted((d for d in items if margins[d] is not None), key=lambda d: margins[d])
    prone = tuple(FlipProneItem(d, float(margins[d]), margins[d] <= NEAR_TIE_NATS, flips[d],
                                items[d].mean_kl, items[d].first_divergence)
                  for d in order[:FLIP_PRONE_SHOWN])
    flipped_ids = [d for d in items if flips[d]]
    return ShiftAnalysis(
        task=p.task, kind=kind, top_k=top_k, summary=summarize(list(items.values())),
        test=test, test_note=note,
        strata=tuple(flip_rates_by_margin([margins[d] for d in items],
                                          [bool(flips[d]) for d in items])),
        flips=len(flipped_ids),
        near_tie_flips=sum(1 for d in flipped_ids
                           if margins[d] is not None and margins[d] <= NEAR_TIE_NATS),
        flip_prone=prone, missing=p.n - len(items))


def adjust(shifts: list[ShiftAnalysis], alpha: float) -> list[ShiftAnalysis]:
    """Holm over the tasks that have a test; each analysis with its adjusted p-value."""
    tested = [s for s in shifts if s.test is not None]
    if not tested:
        return shifts
    adjusted = holm([s.test.pvalue for s in tested], alpha).pvalues_adjusted
    by_task = {s.task: float(a) for s, a in zip(tested, adjusted)}
    return [replace(s, pvalue_adjusted=by_task[s.task]) if s.task in by_task else s
            for s in shifts]


def shifted(shift: ShiftAnalysis, alpha: float) -> bool:
    return shift.pvalue_adjusted is not None and shift.pvalue_adjusted <= alpha
