"""The study page (study.html), its markdown (study.md) and the terminal matrix, from study.json.

Built like the run report: `build_study_page` turns the record into plain view-models (the
arms x tasks matrix, the interaction panel), templates render them. Each cell links to the
comparison's own report (flipped items, speed, exercise), which lives under
`comparisons/<arm>/`. Self-contained: inline style admitted by its hash, no script, no
network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from markupsafe import Markup

from evals.analyse.speed import describe_speedup
from evals.record.run_record_model import TaskRecord
from evals.record.study_record import StudyRecord, StudySpeed
from evals.report._html import PACKAGE_DIR, _csp_hash, environment
from evals.report._markdown import environment as markdown_environment
from evals.report._outputs import _write_atomic
from evals.report._summary_rows import verdict_class
from evals.report.terminal_table import aligned
from evals.text_hygiene import visible


@dataclass(frozen=True, slots=True)
class MatrixCell:
    verdict: str
    verdict_class: str
    delta: str
    interval: str
    flips: str
    p_adjusted: str


@dataclass(frozen=True, slots=True)
class MatrixRow:
    arm: str
    levels: str
    verdict: str
    verdict_class: str
    reason: str
    report_href: str | None
    speed: str
    cells: tuple[MatrixCell | None, ...]


@dataclass(frozen=True, slots=True)
class InteractionRow:
    task: str
    factors: str
    accuracy: str
    contrast: str
    interval: str
    pvalue: str
    significant: bool
    sentence: str


@dataclass(frozen=True, slots=True)
class StudyPage:
    title: str
    verdict: str
    verdict_class: str
    reason: str
    config: str
    baseline: str
    tasks: tuple[str, ...]
    rows: tuple[MatrixRow, ...]
    interactions: tuple[InteractionRow, ...]
    gate: str
    wall: str
    exit_code: int


def _pts(x) -> str:
    return "-" if x is None else f"{x * 100:+.1f}"


def _speed(speed: StudySpeed | None) -> str:
    if speed is None:
        return "not measured"
    return describe_speedup(speed.tpot_speedup, speed.ci_low, speed.ci_high)


def _cell(t: TaskRecord) -> MatrixCell:
    return MatrixCell(
        verdict=t.verdict + ("" if t.gated else " (not gated)"),
        verdict_class=verdict_class(t.verdict), delta=_pts(t.delta),
        interval=f"[{_pts(t.ci_low)}, {_pts(t.ci_high)}]",
        flips=f"{t.correct_to_wrong} / {t.wrong_to_correct}",
        p_adjusted=f"{t.regression_pvalue_adjusted:.3g}")


def build_study_page(data: StudyRecord) -> StudyPage:
    rows = []
    for c in data.comparisons:
        by_task = {t.task: t for t in c.tasks}
        levels = data.levels.get(c.arm, {})
        rows.append(MatrixRow(
            arm=c.arm, levels=", ".join(f"{f}={lv}" for f, lv in levels.items()),
            verdict=c.verdict, verdict_class=verdict_class(c.verdict), reason=c.reason,
            report_href=f"{quote(c.dir)}/report.html" if c.dir else None,
            speed=_speed(c.speed),
            cells=tuple(_cell(by_task[t]) if t in by_task else None for t in data.tasks)))
    interactions = []
    for i in data.interactions:
        acc = i.accuracy
        interactions.append(InteractionRow(
            task=i.task, factors=f"{i.first} x {i.second}",
            accuracy=(f"neither {acc['neither']:.3f}, {i.first} {acc['first_only']:.3f}, "
                      f"{i.second} {acc['second_only']:.3f}, both {acc['both']:.3f}"),
            contrast=_pts(i.contrast),
            interval="-" if i.ci_low is None else f"[{_pts(i.ci_low)}, {_pts(i.ci_high)}]",
            pvalue="-" if i.pvalue is None else f"{i.pvalue:.3g}",
            significant=i.significant, sentence=i.sentence))
    gate = data.gate
    return StudyPage(
        title=f"{data.verdict} \u2013 study {data.name}", verdict=data.verdict,
        verdict_class=verdict_class(data.verdict), reason=data.reason,
        config=data.config, baseline=data.baseline, tasks=tuple(data.tasks),
        rows=tuple(rows), interactions=tuple(interactions),
        gate=(f"alpha {gate.alpha:g}, margin {gate.margin * 100:.1f} pts, "
              f"{gate.correction} correction ({gate.family})"),
        wall=f"{data.wall_seconds:.0f} s", exit_code=data.exit_code)


def _policy(css: str) -> str:
    return (f"default-src 'none'; style-src {_csp_hash(css)}; script-src 'none'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def render_study(page: StudyPage) -> str:
    css = (PACKAGE_DIR / "report.css").read_text(encoding="utf-8")
    return environment().get_template("study.html.j2").render(page=page, css=Markup(css),
                                                               csp=_policy(css))


def render_study_markdown(page: StudyPage) -> str:
    return markdown_environment().get_template("study.md.j2").render(page=page)


def write_study_page(data: StudyRecord, path: Path) -> Path:
    """study.html, and study.md beside it."""
    page = build_study_page(data)
    _write_atomic(Path(path), render_study(page))
    _write_atomic(Path(path).with_suffix(".md"), render_study_markdown(page))
    return Path(path)


def render_study_table(data: StudyRecord) -> str:
    """The arms x tasks matrix for the terminal: delta [interval] and verdict per cell."""
    page = build_study_page(data)
    rows = [("arm", *page.tasks, "speed", "verdict")]
    for r in page.rows:
        rows.append((r.arm, *("-" if c is None else f"{c.delta} {c.interval} {c.verdict}"
                              for c in r.cells), r.speed, r.verdict))
    lines = aligned(rows)
    lines.append("")
    lines.append(f"STUDY VERDICT: {page.verdict} - {page.reason} ({page.gate}; exit code "
                 f"{page.exit_code})")
    return "\n".join(visible(line) for line in lines)
