"""`python -m evals plan`: how many items a comparison needs, or what it can detect.

Paired binary metrics; the discordance is the share of items whose correctness differs
between the arms (from an A/A or an earlier A/B run: flips / items). Items for a drop and
the minimum detectable drop come from the exact conditional McNemar test's power, the test
the gate runs (Connor's 1987 normal approximation is shown beside them: it is optimistic);
non-inferiority uses Nam (1997) (see evals.stats.power).
"""

from __future__ import annotations

from evals import stats
from evals.errors import UserError


def plan(*, discordance: float, alpha: float, power: float, drop: float | None = None,
         margin: float | None = None, items: int | None = None) -> list[str]:
    if not 0 < discordance <= 1:
        raise UserError(f"--discordance must be in (0, 1], got {discordance}.")
    if drop is None and margin is None and items is None:
        raise UserError("plan needs --drop, --margin or --items (see --help).")
    lines = [f"discordance {discordance:.1%}, alpha {alpha:g} (one-sided), power {power:.0%}"]
    try:
        if drop is not None:
            n = stats.items_needed_for_drop(drop, discordance, alpha, power, method="exact")
            approx = stats.items_needed_for_drop(drop, discordance, alpha, power)
            lines.append(f"to detect a drop of {drop * 100:.1f} pts: {n} items (exact McNemar "
                         f"test, the gate's; Connor's normal approximation says {approx})")
        if margin is not None:
            n = stats.items_needed_for_noninferiority(margin, discordance, alpha, power)
            lines.append(f"to show non-inferiority at margin {margin * 100:.1f} pts when nothing "
                         f"changed on average: {n} items (Tango score test)")
        if items is not None:
            mde = stats.mde_paired(items, discordance, alpha, power, method="exact")
            lines.append(f"with {items} items the minimum detectable drop is {mde * 100:.2f} pts "
                         "(exact McNemar test)")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return lines
