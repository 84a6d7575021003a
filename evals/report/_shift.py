"""The Distribution shift section: per task, how far the candidate moved the baseline's
next-token (or choice) distributions, the shift test against the A/A rerun, the flip
rates by baseline margin and the flip-prone items. Built from the run record's `shift`
(evals.analyse.shift); a run without it (or with no task analysed) says why."""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.run_record_model import RunRecord
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


def _test(t: dict, alpha: float) -> tuple[str, bool]:
    test = t.get("test")
    if not test:
        return t.get("test_note") or "not tested", False
    adjusted = t.get("pvalue_adjusted")
    ci = test.get("confidence_interval") or [None, None]
    margin = test.get("margin")
    # a record written before the margin (the Wilcoxon test of any upward shift) has none
    name = (f"mean KL excess over the A/A rerun beyond delta = {_kl(margin)} nats (t-test)"
            if margin is not None else "Wilcoxon signed-rank vs the A/A rerun")
    text = (f"{name}: p={fmt.pvalue(test.get('pvalue'))}"
            f" (Holm {fmt.pvalue(adjusted)}), mean KL excess {_kl(test.get('mean_difference'))}"
            f" nats [{_kl(ci[0])}, {_kl(ci[1])}] over {test.get('n')} items"
            f" ({test.get('n_informative')} differ)")
    if test.get("note"):
        text += f"; {test['note']}"
    return text, adjusted is not None and fmt.finite(adjusted) and adjusted <= alpha


def _task(t: dict, alpha: float) -> ShiftTask:
    s = t.get("summary") or {}
    test, shifted = _test(t, alpha)
    dp = s.get("mean_delta_p")
    skew = s.get("delta_p_skew")
    first = s.get("median_first_divergence")
    kind = ("per-token top-%s" % t.get("top_k") if t.get("kind") == "generation"
            else "per-choice log-likelihoods")
    return ShiftTask(
        task=str(t.get("task")), kind=kind,
        items=f"{s.get('n_items')} items, {s.get('n_positions')} compared positions"
              + (f", {t.get('missing')} without data" if t.get("missing") else ""),
        mean_kl=_kl(s.get("mean_kl")), p95_kl=_kl(s.get("p95_kl")), max_kl=_kl(s.get("max_kl")),
        top1=f"{float(s.get('top1_agreement', 1.0)):.2%}",
        diverged=str(s.get("diverged")),
        first_divergence=fmt.MISSING if first is None else f"{float(first):g}",
        delta_p=(f"{float(dp):+.2e}" if fmt.finite(dp) else fmt.MISSING)
                + ("" if skew is None else f", skew {float(skew):+.2f}"),
        test=test, shifted=shifted,
        strata=tuple((str(label), str(n), f"{flipped} ({flipped / n:.0%})" if n else "0")
                     for label, n, flipped in t.get("strata") or []),
        flips=(f"{t.get('flips')} items changed score; {t.get('near_tie_flips')} of them at a "
               "near tie (baseline margin within bf16 rounding)"),
        prone=tuple(ProneRow(str(r.get("doc_id")), f"{float(r.get('margin')):.4f}",
                             bool(r.get("near_tie")), str(r.get("flip") or ""),
                             _kl(r.get("mean_kl")),
                             fmt.MISSING if r.get("first_divergence") is None
                             else str(r.get("first_divergence")))
                    for r in t.get("flip_prone") or []))


def shift_section(summary: RunRecord) -> ShiftSection:
    data = summary.shift or {}
    alpha = float(data.get("alpha", summary.gate.alpha))
    notes = tuple((str(k), str(v)) for k, v in (data.get("notes") or {}).items())
    if not data:
        notes = (("all tasks", "this run was analysed before the suite recorded "
                  "distribution shifts"),)
    return ShiftSection(gate=str(data.get("gate", "warn")),
                        tasks=tuple(_task(t, alpha) for t in data.get("tasks") or []),
                        notes=notes)
