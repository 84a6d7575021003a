"""How numbers and plain values are written in every report (HTML, Markdown, JUnit).

One place, so the report, the PR comment and the terminal table (`evals.report.terminal_table`) agree:
means with three decimals, deltas in percentage points, p-values with three
significant digits. Missing or non-finite values print as an en dash.
"""

from __future__ import annotations

import json
import math

MISSING = "\u2013"


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def mean(x) -> str:
    return f"{x:.3f}" if finite(x) else MISSING


def points(x) -> str:
    """A difference in accuracy units as signed percentage points: 0.012 -> '+1.2'."""
    return f"{x * 100:+.1f}" if finite(x) else MISSING


def points_interval(low, high) -> str:
    return f"[{points(low)}, {points(high)}]"


def unsigned_points(x) -> str:
    return f"{x * 100:.1f}" if finite(x) else MISSING


def pvalue(p) -> str:
    return f"{p:.3g}" if finite(p) else MISSING


def share(x) -> str:
    return f"{x * 100:.1f}%" if finite(x) else MISSING


def seconds(x) -> str:
    return f"{x:,.1f} s" if finite(x) else MISSING


def count(x) -> str:
    return f"{int(x):,}" if finite(x) else MISSING


def plain(value) -> str:
    """A config or manifest value as one line: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except ValueError:  # circular structure; cannot come from JSON, but never fail a report
        return repr(value)
