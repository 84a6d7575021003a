"""Confidence intervals: the tuple every ``confidence_interval`` method returns, the one
default level, and the one rule that ties an interval's level to the gate's alpha."""

from __future__ import annotations

from typing import NamedTuple

DEFAULT_CONFIDENCE_LEVEL = 0.95
"""Every statistic's default level (scipy.stats' own); the gate passes `interval_level`."""


class ConfidenceInterval(NamedTuple):
    """Lower and upper confidence limits, as in ``scipy.stats``' result objects."""

    low: float
    high: float


def interval_level(alpha: float) -> float:
    """The two-sided level, 1 - 2 alpha, whose interval agrees with a one-sided test at
    `alpha`: the test rejects "a drop of at least the margin" exactly when the interval's
    lower limit lies above minus the margin (the two one-sided tests procedure, Schuirmann
    1987, J. Pharmacokinet. Biopharm. 15:657-680). alpha 0.05 gives a 90% interval."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5) for a 1 - 2 alpha interval; got {alpha!r}.")
    return 1 - 2 * alpha
