"""The plain-text verdict table printed on stdout (from the summary dict)."""

from __future__ import annotations


def _pts(x: float) -> str:
    return f"{x * 100:+.1f}"


def _items(t: dict) -> str:
    looks = t.get("sequential")
    return f"{t['n']}/{looks['n_items']}" if looks else str(t["n"])


def render_table(summary: dict) -> str:
    header = ("task", "metric", "n", "baseline", "candidate", "delta pts [interval]",
              "c->w", "w->c", "p adj", "verdict")
    rows = [header]
    for t in summary["tasks"]:
        rows.append((
            t["task"] + ("" if t["gated"] else " (not gated)"), t["metric"], _items(t),
            f"{t['baseline_mean']:.3f}", f"{t['candidate_mean']:.3f}",
            f"{_pts(t['delta'])} [{_pts(t['ci_low'])}, {_pts(t['ci_high'])}]",
            str(t["correct_to_wrong"]), str(t["wrong_to_correct"]),
            f"{t['regression_pvalue_adjusted']:.3g}", t["verdict"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    gate = summary["gate"]
    lines.append("")
    lines.append(f"VERDICT: {summary['verdict']} - {summary['reason']} "
                 f"(alpha {gate['alpha']:g}, margin {gate['margin'] * 100:.1f} pts, "
                 f"{gate['correction']} correction; exit code {summary['exit_code']})")
    for t in summary["tasks"]:
        lines.append(f"  {t['task']}: {t['reason']}")
    return "\n".join(lines)
