"""The confidence-interval tuple returned by every ``confidence_interval`` method."""

from __future__ import annotations

from typing import NamedTuple


class ConfidenceInterval(NamedTuple):
    """Lower and upper confidence limits, as in ``scipy.stats``' result objects."""

    low: float
    high: float
