"""Speed beside accuracy: the view-model of the banner's speed line and the speed section.

A/B runs store the record's `speed` (evals.analyse.speed: per-request latencies and the TPOT
speedup with its interval). Runs without it (compare runs, old summaries) fall back to
the throughput measured from the arms' per-task wall times, or to "not measured".
"""

from __future__ import annotations

from dataclasses import dataclass

from evals.analyse.speed import describe_requirement, describe_speedup
from evals.record.arm_record import ArmRecord, ArmTaskRecord
from evals.record.run_parts import ArmSpeedRecord, SpeedRecord
from evals.record.run_record_model import RunRecord
from evals.report import _formatting as fmt


@dataclass(frozen=True, slots=True)
class SpeedChange:
    text: str


@dataclass(frozen=True, slots=True)
class SpeedRow:
    arm: str
    requests: str
    ttft: str
    tpot: str
    tokens_per_s: str
    requests_per_s: str
    acceptance: str


@dataclass(frozen=True, slots=True)
class SpeedSection:
    rows: tuple[SpeedRow, ...]
    speedup: str
    throughput: str
    gate: str | None
    note: str | None


THROUGHPUT_UNIT = "in output tokens per second of task time"


def _ms(x) -> str:
    return f"{float(x) * 1000:,.1f}" if fmt.finite(x) else fmt.MISSING


def _rate(x) -> str:
    return f"{float(x):,.1f}" if fmt.finite(x) else fmt.MISSING


def _speedup_text(speed: SpeedRecord) -> str:
    if not fmt.finite(speed.tpot_speedup):
        return "not measured (no request produced two or more tokens in both arms)"
    text = describe_speedup(speed.tpot_speedup, speed.ci_low, speed.ci_high,
                            0.9 if speed.confidence is None else speed.confidence)
    if fmt.finite(speed.rerun_speedup):
        # the A/A: how far two engine starts of the baseline's config differ
        text += "; the baseline's own rerun: " + describe_speedup(
            speed.rerun_speedup).replace("candidate ", "", 1)
    return text


def _gate_text(speed: SpeedRecord) -> str | None:
    gate, minimum = speed.gate, speed.min_speedup
    if gate is None:
        return None
    words = {"met": "met", "missed": "missed: the interval lies below it",
             "undecided": "undecided: the interval straddles it"}
    if fmt.finite(speed.gate_low) and fmt.finite(speed.gate_high):
        words = {k: f"{v} (the interval widened by the rerun's difference: "
                    f"{speed.gate_low:.2f}-{speed.gate_high:.2f}x)" for k, v in words.items()}
    elif gate == "undecided":
        words["undecided"] = ("undecided: no baseline rerun (`noise_floor: true`) sizes how "
                              "far two engine starts differ")
    required = describe_requirement(minimum) if fmt.finite(minimum) and minimum > 0 else "?"
    return f"required (gate.min_speedup): candidate {required}; {words.get(gate, gate)}"


def speed_section(summary: RunRecord) -> SpeedSection | None:
    speed = summary.speed
    if speed is None:
        return None
    rows = []
    for arm, a in (("baseline", speed.baseline), ("candidate", speed.candidate)):
        a = a or ArmSpeedRecord(arm=arm)
        rate = a.acceptance_rate
        rows.append(SpeedRow(
            arm=arm, requests=fmt.count(a.requests),
            ttft=f"{_ms(a.ttft_p50)} / {_ms(a.ttft_p95)}",
            tpot=f"{_ms(a.tpot_p50)} / {_ms(a.tpot_p95)}",
            tokens_per_s=_rate(a.output_tokens_per_s),
            requests_per_s=_rate(a.requests_per_s),
            acceptance=f"{rate:.1%}" if fmt.finite(rate) else "\u2013"))
    ratio = speed.throughput_ratio
    return SpeedSection(rows=tuple(rows), speedup=_speedup_text(speed),
                        throughput=describe_speedup(ratio, unit=THROUGHPUT_UNIT)
                        if fmt.finite(ratio) else fmt.MISSING,
                        gate=_gate_text(speed), note=speed.note)


def _task_records(arm: ArmRecord | None) -> dict[str, ArmTaskRecord]:
    return dict(arm.tasks or {}) if arm is not None else {}


def _number(record: ArmTaskRecord, key: str) -> float:
    value = getattr(record, key)
    return float(value) if fmt.finite(value) else 0.0


def speed_change(summary: RunRecord) -> SpeedChange | None:
    """The banner's one line: the measured speedup, else wall-time throughput, else None."""
    speed = summary.speed
    if speed is not None and fmt.finite(speed.tpot_speedup):
        return SpeedChange(text=_speedup_text(speed))
    arms = summary.arms
    base, cand = (_task_records(arms[a]) if a in arms else {} for a in ("baseline", "candidate"))
    timed = sorted(t for t in set(base) & set(cand)
                   if _number(base[t], "wall_seconds") > 0 and _number(cand[t], "wall_seconds") > 0)
    tokens_b = sum(_number(base[t], "generated_tokens") for t in timed)
    tokens_c = sum(_number(cand[t], "generated_tokens") for t in timed)
    if not timed or tokens_b <= 0 or tokens_c <= 0:
        return None
    rate_b = tokens_b / sum(_number(base[t], "wall_seconds") for t in timed)
    rate_c = tokens_c / sum(_number(cand[t], "wall_seconds") for t in timed)
    words = describe_speedup(rate_c / rate_b, unit="in generated tokens per second")
    return SpeedChange(text=f"{words} (candidate {rate_c:,.1f} vs baseline {rate_b:,.1f}, over "
                            f"{len(timed)} task(s), task wall time)")
