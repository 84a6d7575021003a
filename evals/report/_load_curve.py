"""The load curve's view-model: the table (summary.md and the report) and one SVG chart of
both arms' output-token throughput and TTFT p95 against concurrency, the SLO line and the
crossover marked. Built from the record's `load_curve` (evals.record.load_curve_record);
the templates only place what is here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evals.record.load_curve_record import LoadCurveRecord, LevelRecord
from evals.record.run_record_model import RunRecord
from evals.report import _formatting as fmt
from evals.report._svg_axis import nice_step

ARMS = ("baseline", "candidate")
PANEL_WIDTH, PANEL_GAP, HEIGHT = 330.0, 60.0, 260.0
LEFT, TOP, BOTTOM = 56.0, 28.0, 40.0


@dataclass(frozen=True, slots=True)
class LoadRow:
    concurrency: str
    tokens_per_s: tuple[str, str]
    """baseline, candidate."""
    speedup: str
    ttft_p95: tuple[str, str]
    tpot_p95: tuple[str, str]
    note: str


@dataclass(frozen=True, slots=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True, slots=True)
class Marker:
    x: float
    y: float
    tooltip: str


@dataclass(frozen=True, slots=True)
class Series:
    arm: str
    lines: tuple[str, ...]
    """`x,y x,y ...` per polyline: levels measured in a row (a failed level breaks it)."""
    markers: tuple[Marker, ...]


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    left: float
    right: float
    top: float
    bottom: float
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    series: tuple[Series, ...]
    slo_y: float | None
    slo_label: str
    crossover_x: float | None
    crossover_label: str
    crossover_anchor: str
    """Where the label sits: `start` (right of the line) or `end` (left of it)."""


@dataclass(frozen=True, slots=True)
class LoadCurveSection:
    setup: str
    rows: tuple[LoadRow, ...]
    crossover: str
    slo: str | None
    cost: str
    gate: tuple[str, ...]
    """`gate.speed`'s checks, one line each."""
    notes: tuple[str, ...]
    panels: tuple[Panel, ...]
    width: float
    height: float
    confidence: str


def _ms(latency) -> str:
    return f"{latency.p95 * 1000:,.1f}" if latency is not None else fmt.MISSING


def _rate(x) -> str:
    return f"{float(x):,.1f}" if fmt.finite(x) else fmt.MISSING


def crossover_text(curve: LoadCurveRecord) -> str:
    c = curve.crossover
    span = f"{curve.levels[0]}-{curve.levels[-1]}"
    if c.kind == "crossed" and c.concurrency is not None and c.between:
        text = (f"the candidate stops being faster at concurrency {c.concurrency:.1f} "
                f"(between levels {c.between[0]} and {c.between[1]}, linearly interpolated)")
        return text + _straddles(curve, c.between)
    return {"faster_throughout": f"no crossover in the range: the candidate is faster at every "
                                 f"level measured ({span})",
            "slower_throughout": f"no crossover: the candidate is slower at every level "
                                 f"measured ({span})",
            "not_faster_at_start": "no crossover: the candidate is not faster at the lowest "
                                   f"level; it is faster at {_faster_levels(curve)}",
            }.get(c.kind, "not measured: fewer than two levels finished in both arms")


def _faster_levels(curve: LoadCurveRecord) -> str:
    """The levels where the candidate's speed-up is above 1 (a curve that starts slower
    may be faster at some later levels only, not at every one above the first)."""
    faster = [str(s.concurrency) for s in curve.speedups
              if s is not None and fmt.finite(s.speedup) and s.speedup > 1]
    return ", ".join(faster) if faster else "no level"


def _straddles(curve: LoadCurveRecord, levels) -> str:
    """The crossing is of the point estimates: where a level's interval holds 1, say so."""
    unsure = [s.concurrency for s in curve.speedups if s.concurrency in levels
              and fmt.finite(s.low) and fmt.finite(s.high) and s.low <= 1 <= s.high]
    if not unsure:
        return ""
    where = " and ".join(map(str, unsure))
    return (f"; the speed-up's interval at level {where} includes 1, so the crossing is not "
            "established")


def _slo_text(curve: LoadCurveRecord) -> str | None:
    targets = [f"TTFT p95 at most {curve.slo_ttft_p95_ms:g} ms" if curve.slo_ttft_p95_ms else "",
               f"TPOT p95 at most {curve.slo_tpot_p95_ms:g} ms" if curve.slo_tpot_p95_ms else ""]
    targets = [t for t in targets if t]
    if not targets:
        return None
    parts = []
    for name in ARMS:
        arm = curve.arms.get(name)
        if arm is None or not arm.levels:
            parts.append(f"{name} not measured")
            continue
        safe = arm.slo_safe_concurrency
        sure = arm.slo_confident_concurrency
        parts.append(f"{name} {safe if safe is not None else 'no level'}"
                     f" ({sure if sure is not None else 'no level'} with the p95's upper "
                     "interval end)")
    return f"highest concurrency meeting {' and '.join(targets)}: " + "; ".join(parts)


def _seconds(x) -> str:
    if not fmt.finite(x):
        return fmt.MISSING
    return f"{x:,.0f} s" if x >= 10 else f"{x:.1f} s"


def _cost_text(curve: LoadCurveRecord) -> str:
    """The sweep's cost against the accuracy part, and where each arm's sweep came from."""
    parts = []
    for name in ARMS:
        arm = curve.arms.get(name)
        if arm is None or arm.sweep_seconds is None:
            parts.append(f"{name} no sweep")
        elif arm.origin == "reused":
            where = (f"against {_seconds(arm.accuracy_seconds)} for its accuracy items"
                     if arm.accuracy_seconds is not None else "alone on a fresh server")
            parts.append(f"{name} 0 s here: reused from run {arm.reused_run}, where it took "
                         f"{_seconds(arm.sweep_seconds)} {where}")
        elif arm.origin == "rerun":
            parts.append(f"{name} {_seconds(arm.sweep_seconds)} rerun alone on a fresh server "
                         f"(its start {_seconds(arm.server_start_seconds)}; its accuracy items "
                         "were reused, so the server was not warmed by them)")
        else:
            parts.append(f"{name} {_seconds(arm.sweep_seconds)} against "
                         f"{_seconds(arm.accuracy_seconds)} for its accuracy items on the "
                         "same server")
    return "sweep wall time: " + "; ".join(parts)


def _by_level(curve: LoadCurveRecord, arm: str) -> dict[int, LevelRecord]:
    record = curve.arms.get(arm)
    return {lv.concurrency: lv for lv in (record.levels if record else [])}


def _rows(curve: LoadCurveRecord) -> tuple[LoadRow, ...]:
    levels = {a: _by_level(curve, a) for a in ARMS}
    speedups = {s.concurrency: s for s in curve.speedups}
    rows = []
    for c in curve.levels:
        b, k = levels["baseline"].get(c), levels["candidate"].get(c)
        s = speedups.get(c)
        speedup = (f"{s.speedup:.2f}x ({s.low:.2f}-{s.high:.2f})"
                   if s is not None and fmt.finite(s.speedup) and fmt.finite(s.low)
                   and fmt.finite(s.high) else fmt.MISSING)
        failed = [f"{a} failed: {lv.error}" for a, lv in (("baseline", b), ("candidate", k))
                  if lv is not None and lv.status != "ok"]
        rows.append(LoadRow(
            concurrency=str(c),
            tokens_per_s=(_rate(b.output_tokens_per_s) if b else fmt.MISSING,
                          _rate(k.output_tokens_per_s) if k else fmt.MISSING),
            speedup=speedup,
            ttft_p95=(_ms(b.ttft) if b else fmt.MISSING, _ms(k.ttft) if k else fmt.MISSING),
            tpot_p95=(_ms(b.tpot) if b else fmt.MISSING, _ms(k.tpot) if k else fmt.MISSING),
            note="; ".join(failed)))
    return tuple(rows)


def _x_map(levels: list[int], left: float, right: float):
    """Concurrency to x: log2 spacing when the levels span a factor of 8 or more."""
    scale = math.log2 if levels[-1] >= 8 * levels[0] else float
    lo, hi = scale(levels[0]), scale(levels[-1])

    def x(c: float) -> float:
        if hi == lo:
            return round((left + right) / 2, 2)
        return round(left + (scale(c) - lo) / (hi - lo) * (right - left), 2)

    return x


def _panel(curve: LoadCurveRecord, title: str, value, unit: str, offset: float,
           slo: float | None, slo_label: str) -> Panel:
    left, right = offset + LEFT, offset + PANEL_WIDTH - 10
    top, bottom = TOP, HEIGHT - BOTTOM
    x = _x_map(curve.levels, left, right)
    data = {a: [(c, value(lv)) for c, lv in sorted(_by_level(curve, a).items())] for a in ARMS}
    values = [v for pts in data.values() for _, v in pts if v is not None]
    top_value = max(values + ([slo] if slo else []), default=1.0) or 1.0
    step = nice_step(top_value * 1.1, 4)
    high = math.ceil(top_value * 1.1 / step) * step

    def y(v: float) -> float:
        return round(bottom - v / high * (bottom - top), 2)

    series = []
    for arm, pts in data.items():
        runs, current = [], []
        for c, v in pts:
            if v is None:
                runs.append(current)
                current = []
            else:
                current.append(f"{x(c)},{y(v)}")
        runs.append(current)
        series.append(Series(arm=arm, lines=tuple(" ".join(r) for r in runs if len(r) > 1),
                             markers=tuple(
            Marker(x(c), y(v), f"{arm}, concurrency {c}: {v:,.1f} {unit}")
            for c, v in pts if v is not None)))
    cross = curve.crossover
    cross_x = (x(cross.concurrency) if cross.kind == "crossed" and cross.concurrency else None)
    y_ticks = tuple(Tick(y(k * step), f"{k * step:g}") for k in range(int(round(high / step)) + 1))
    return Panel(title=title, left=left, right=right, top=top, bottom=bottom,
                 x_ticks=tuple(Tick(x(c), str(c)) for c in curve.levels), y_ticks=y_ticks,
                 series=tuple(series), slo_y=y(slo) if slo else None, slo_label=slo_label,
                 crossover_x=cross_x,
                 crossover_anchor="end" if cross_x and cross_x > (left + right) / 2 else "start",
                 crossover_label=(f"crossover {cross.concurrency:.1f}" if cross_x else ""))


def _throughput(level: LevelRecord) -> float | None:
    ok = level.status == "ok" and fmt.finite(level.output_tokens_per_s)
    return float(level.output_tokens_per_s) if ok else None


def _ttft_p95_ms(level: LevelRecord) -> float | None:
    return level.ttft.p95 * 1000 if level.status == "ok" and level.ttft is not None else None


def load_curve_section(summary: RunRecord) -> LoadCurveSection | None:
    curve = summary.load_curve
    if curve is None or not curve.levels:
        return None
    slo = curve.slo_ttft_p95_ms
    panels = (
        _panel(curve, "output tokens/s", _throughput, "tokens/s", 0.0, None, ""),
        _panel(curve, "TTFT p95 (ms)", _ttft_p95_ms, "ms", PANEL_WIDTH + PANEL_GAP, slo,
               f"SLO {slo:g} ms" if slo else ""))
    return LoadCurveSection(
        setup=(f"{curve.requests_per_level} streamed requests per level and arm after a "
               f"warm-up, prompts: {curve.prompts}, {curve.output_tokens} output tokens each"),
        rows=_rows(curve), crossover=crossover_text(curve), slo=_slo_text(curve),
        cost=_cost_text(curve), notes=tuple(curve.notes), panels=panels,
        gate=tuple(f"{c.check}: {c.measured} - {c.outcome}" for c in curve.gate or ()),
        width=2 * PANEL_WIDTH + PANEL_GAP, height=HEIGHT,
        confidence=f"{curve.confidence:.0%}")
