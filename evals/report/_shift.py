"""The Distribution shift section: per task, how far the candidate moved the baseline's
next-token (or choice) distributions, the shift test against the A/A rerun, the flip
rates by baseline margin and the flip-prone items. Built from the run record's `shift`
(evals.analyse.shift); a run without it (or with no task analysed) says why."""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.run_record_model import RunRecord
from evals.record.shift_record import DivergenceRecord, TaskShiftRecord
from evals.report import _formatting as fmt


@dataclass(frozen=True, slots=True)
class ProneRow:
    doc_id: str
    margin: str
    near_tie: bool
    flip: str
    mean_kl: str
    first_divergence: str


@dataclass(frozen=True, slots=True)
class ShiftTask:
    task: str
    kind: str
    items: str
    mean_kl: str
    p95_kl: str
    max_kl: str
    top1: str
    diverged: str
    first_divergence: str
    delta_p: str
    test: str
    shifted: bool
    strata: tuple[tuple[str, str, str], ...]
    flips: str
    prone: tuple[ProneRow, ...]


@dataclass(frozen=True, slots=True)
class ShiftSection:
    gate: str
    tasks: tuple[ShiftTask, ...]
    notes: tuple[tuple[str, str], ...]
    """(task, why it has no shift analysis)."""


def _kl(x) -> str:
    return f"{float(x):.2e}" if fmt.finite(x) else fmt.MISSING


def _test(t: TaskShiftRecord, alpha: float) -> tuple[str, bool]:
    test = t.test
    if test is None:
        return t.test_note or "not tested", False
    adjusted = t.pvalue_adjusted
    ci = test.confidence_interval or [None, None]
    margin = test.margin
    # a record written before the margin (the Wilcoxon test of any upward shift) has none
    name = (f"mean KL excess over the A/A rerun beyond delta = {_kl(margin)} nats (t-test)"
            if margin is not None else "Wilcoxon signed-rank vs the A/A rerun")
    text = (f"{name}: p={fmt.pvalue(test.pvalue)}"
            f" (Holm {fmt.pvalue(adjusted)}), mean KL excess {_kl(test.mean_difference)}"
            f" nats [{_kl(ci[0])}, {_kl(ci[1])}] over {test.n} items"
            f" ({test.n_informative} differ)")
    if test.note:
        text += f"; {test.note}"
    return text, adjusted is not None and fmt.finite(adjusted) and adjusted <= alpha


def _task(t: TaskShiftRecord, alpha: float) -> ShiftTask:
    s = t.summary or DivergenceRecord()
    test, shifted = _test(t, alpha)
    dp = s.mean_delta_p
    skew = s.delta_p_skew
    first = s.median_first_divergence
    kind = ("per-token top-%s" % t.top_k if t.kind == "generation"
            else "per-choice log-likelihoods")
    return ShiftTask(
        task=t.task, kind=kind,
        items=f"{s.n_items} items, {s.n_positions} compared positions"
              + (f", {t.missing} without data" if t.missing else ""),
        mean_kl=_kl(s.mean_kl), p95_kl=_kl(s.p95_kl), max_kl=_kl(s.max_kl),
        top1=f"{1.0 if s.top1_agreement is None else s.top1_agreement:.2%}",
        diverged=str(s.diverged),
        first_divergence=fmt.MISSING if first is None else f"{float(first):g}",
        delta_p=(f"{float(dp):+.2e}" if fmt.finite(dp) else fmt.MISSING)
                + ("" if skew is None else f", skew {float(skew):+.2f}"),
        test=test, shifted=shifted,
        strata=tuple((str(label), str(n), f"{flipped} ({flipped / n:.0%})" if n else "0")
                     for label, n, flipped in t.strata or []),
        flips=(f"{t.flips} items changed score; {t.near_tie_flips} of them at a "
               "near tie (baseline margin within bf16 rounding)"),
        prone=tuple(ProneRow(str(r.doc_id), f"{r.margin:.4f}", r.near_tie, r.flip,
                             _kl(r.mean_kl),
                             fmt.MISSING if r.first_divergence is None
                             else str(r.first_divergence))
                    for r in t.flip_prone or []))


def shift_section(summary: RunRecord) -> ShiftSection:
    data = summary.shift
    if data is None:
        return ShiftSection(gate="warn", tasks=(), notes=(
            ("all tasks", "this run was analysed before the suite recorded distribution "
                          "shifts"),))
    alpha = summary.gate.alpha if data.alpha is None else data.alpha
    return ShiftSection(gate=data.gate or "warn",
                        tasks=tuple(_task(t, alpha) for t in data.tasks),
                        notes=tuple(data.notes.items()))
