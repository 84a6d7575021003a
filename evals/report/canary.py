"""The canary page (canary.html): did the gate catch each injected fault?

Built like the run report: `build_canary_page` turns canary.json into plain view-models,
`render_canary` fills the template. Self-contained: inline style admitted by its hash,
no script, no network; links to each fault run's own report.html are relative.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from markupsafe import Markup

from evals.record.canary_record import CanaryRecord
from evals.report._exercise import ExerciseSection, exercise_section
from evals.report._html import PACKAGE_DIR, _csp_hash, environment
from evals.report._outputs import _write_atomic
from evals.report._summary_rows import verdict_class
from evals.report.terminal_table import aligned


@dataclass(frozen=True, slots=True)
class CanaryRow:
    fault: str
    rate: str
    harmful: str
    verdict: str
    verdict_class: str
    exit_code: str
    flips: str
    items: str
    fired: str
    caught: str
    ok: bool
    min_rate: str
    report_href: str
    models: str


@dataclass(frozen=True, slots=True)
class CanaryPage:
    title: str
    config: str
    passed: bool
    clean_verdict: str
    clean_href: str
    wall: str
    rows: tuple[CanaryRow, ...]
    exercise: ExerciseSection | None


def _href(run_id: str) -> str:
    return f"../{quote(run_id)}/report.html"


def build_canary_page(record: CanaryRecord) -> CanaryPage:
    rows = []
    for r in record.faults:
        spec = " (only with spec decode)" if r.options.only_with_spec_decode else ""
        rate = r.min_detectable_rate
        rows.append(CanaryRow(
            fault=r.fault + spec, rate=f"{r.rate:g}",
            harmful="harmful" if r.harmful else "benign", verdict=r.verdict,
            verdict_class=verdict_class(r.verdict), exit_code=str(r.exit_code),
            flips=f"{r.correct_to_wrong} / {r.wrong_to_correct}",
            items=f"{r.items_used} of {r.items_planned}", fired=f"{r.fired:,}",
            caught="yes" if r.caught else "no", ok=r.as_expected,
            min_rate="not within (0, 1]" if rate is None else f"{rate:.3g}",
            report_href=_href(r.run_id), models=r.models))
    clean = record.clean
    exercise = exercise_section(record.exercise) if record.exercise else None
    return CanaryPage(
        title=f"canary {'PASSED' if record.passed else 'FAILED'} \u2013 {record.name}",
        config=record.config, passed=record.passed,
        clean_verdict=clean.verdict, clean_href=_href(clean.run_id),
        wall=f"{record.wall_seconds:.0f} s in all, {clean.wall_seconds:.0f} s of it the "
             "clean A/B run", rows=tuple(rows), exercise=exercise)

def render_canary(page: CanaryPage) -> str:
    css = (PACKAGE_DIR / "report.css").read_text(encoding="utf-8")
    policy = (f"default-src 'none'; style-src {_csp_hash(css)}; script-src 'none'; "
              "img-src data:; base-uri 'none'; form-action 'none'")
    return environment().get_template("canary.html.j2").render(page=page, css=Markup(css),
                                                                csp=policy)


def write_canary_page(record: CanaryRecord, path: Path) -> Path:
    _write_atomic(Path(path), render_canary(build_canary_page(record)))
    return Path(path)


def _rate_text(x: float | None) -> str:
    return "> 1 (not within reach)" if x is None else f"{x:.3g}"


def render_canary_table(record: CanaryRecord) -> str:
    header = ("fault", "rate", "harmful", "verdict", "exit", "c->w", "w->c", "items",
              "fired", "caught", "min rate @80%")
    rows = [header]
    for r in record.faults:
        name = r.fault + (" (only with spec decode)" if r.options.only_with_spec_decode
                          else "")
        rows.append((name, f"{r.rate:g}", "yes" if r.harmful else "no", r.verdict,
                     str(r.exit_code), str(r.correct_to_wrong), str(r.wrong_to_correct),
                     f"{r.items_used}/{r.items_planned}", str(r.fired),
                     ("yes" if r.caught else "no") + ("" if r.as_expected else " (!)"),
                     _rate_text(r.min_detectable_rate)))
    lines = aligned(rows)
    clean = record.clean
    lines.append("")
    lines.append(f"clean candidate: {clean.verdict} (exit {clean.exit_code}); canary "
                 f"{'PASSED' if record.passed else 'FAILED'}: every harmful fault must give "
                 "REGRESSION, every benign one must not")
    lines.append(f"wall time: {record.wall_seconds:.0f} s in all, {clean.wall_seconds:.0f} s "
                 "of it the clean A/B run")
    return "\n".join(lines)
