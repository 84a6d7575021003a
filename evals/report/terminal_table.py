"""The plain-text verdict table printed on stdout (from the run record)."""

from __future__ import annotations

from evals.record.run_parts import ExerciseRecord
from evals.record.run_record_model import RunRecord, TaskRecord
from evals.report._summary_rows import platform_line
from evals.report._speed import speed_change
from evals.text_hygiene import visible


def _pts(x: float) -> str:
    return f"{x * 100:+.1f}"


def _items(t: TaskRecord) -> str:
    looks = t.sequential
    return f"{t.n}/{looks.n_items}" if looks else str(t.n)


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows of cells as left-aligned columns; the first row is the header, ruled below.
    Cells are shown with control characters escaped (no ANSI or bidi tricks)."""
    rows = [tuple(visible(cell) for cell in row) for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def render_table(summary: RunRecord) -> str:
    header = ("task", "metric", "n", "baseline", "candidate", "delta pts [interval]",
              "c->w", "w->c", "p drop adj", "verdict")
    rows = [header]
    for t in summary.tasks:
        rows.append((
            t.task + ("" if t.gated else " (not gated)"), str(t.metric), _items(t),
            f"{t.baseline_mean:.3f}", f"{t.candidate_mean:.3f}",
            f"{_pts(t.delta)} [{_pts(t.ci_low)}, {_pts(t.ci_high)}]",
            str(t.correct_to_wrong), str(t.wrong_to_correct),
            f"{t.regression_pvalue_adjusted:.3g}", t.verdict))
    lines = aligned(rows)
    gate = summary.gate
    lines.append("")
    lines.append(f"VERDICT: {summary.verdict} - {summary.reason} "
                 f"(alpha {gate.alpha:g}, margin {gate.margin * 100:.1f} pts, "
                 f"{gate.correction} correction; exit code {summary.exit_code})")
    for t in summary.tasks:
        lines.append(f"  {t.task}: {t.reason}")
    speed = speed_change(summary)
    if speed is not None:
        lines.append(f"SPEED: {speed.text}")
    pooled = summary.pooled
    if pooled:
        role = "gates the run" if pooled.gates else "reported only; `gate.pooled: true` gates"
        lines.append(f"  pooled over {len(pooled.tasks)} gated tasks ({role}): "
                     f"{pooled.correct_to_wrong} correct->wrong vs {pooled.wrong_to_correct}"
                     f" wrong->correct, exact stratified McNemar p={pooled.pvalue:.3g}"
                     + (f", p adj={pooled.pvalue_adjusted:.3g}" if pooled.gates else ""))
    lines.extend(_exercise_lines(summary.exercise))
    if summary.platform:
        lines.append(f"PLATFORM: {platform_line(summary)}")
    return "\n".join(visible(line) for line in lines)


def _share(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _exercise_lines(exercise: ExerciseRecord | None) -> list[str]:
    """What vLLM reports each arm did per task (evals.analyse.exercise)."""
    if exercise is None or not exercise.tasks:
        return []
    lines = ["", "EXERCISED (what vLLM reports it did; declared by the candidate: "
             f"{', '.join(exercise.declared) or 'nothing the baseline lacks'}):"]
    for r in exercise.tasks:
        drafted = r.drafted_tokens
        draft = (f"draft acceptance {_share(r.acceptance)} of {drafted:,.0f} tokens"
                 if drafted else "no drafts")
        lines.append(f"  {r.arm}: {r.task}: prefix-cache hits "
                     f"{_share(r.cached_share)} of prompt tokens, {draft}, "
                     f"{r.preemptions or 0:,.0f} preemptions")
    if exercise.not_exercised:
        lines.append(f"  NOT EXERCISED: {' and '.join(exercise.not_exercised)}")
    return lines
