"""One numeric SVG axis, shared by the forest plot and the trend chart: a padded range
rounded out to a "nice" step (1, 2, 2.5 or 5 times a power of ten), the tick values and
their labels, and the map from a value to a position in SVG user units."""

from __future__ import annotations

import math
from dataclasses import dataclass


def nice_step(span: float, target_ticks: int = 6) -> float:
    raw = span / target_ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    for multiple in (1, 2, 2.5, 5, 10):
        if raw <= multiple * magnitude:
            return multiple * magnitude
    return 10 * magnitude


@dataclass(frozen=True, slots=True)
class Axis:
    low: float
    high: float
    step: float
    start: float
    """SVG position of `low` (left or bottom end)."""
    end: float
    """SVG position of `high` (right or top end)."""

    @classmethod
    def fit(cls, values: list[float], *, start: float, end: float, pad_share: float,
            min_pad: float, target_ticks: int = 6) -> Axis:
        """An axis over `values` padded by `pad_share` of their span (at least `min_pad`)."""
        low, high = min(values), max(values)
        pad = max((high - low) * pad_share, min_pad)
        step = nice_step(high - low + 2 * pad, target_ticks)
        return cls(low=math.floor((low - pad) / step) * step,
                   high=math.ceil((high + pad) / step) * step, step=step, start=start, end=end)

    def position(self, value: float) -> float:
        return round(self.start + (value - self.low) / (self.high - self.low)
                     * (self.end - self.start), 2)

    def ticks(self) -> list[tuple[float, str]]:
        """(position, label) of every tick: "0" at zero, else a signed value."""
        count = int(round((self.high - self.low) / self.step))
        values = (self.low + k * self.step for k in range(count + 1))
        return [(self.position(v), "0" if abs(v) < self.step / 1000 else f"{v:+g}")
                for v in values]
