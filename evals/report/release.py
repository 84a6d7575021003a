"""The release's outputs from its record (evals.record.release_record.ReleaseRecord):
release.html, release.md, junit.xml, and what CI systems read.

View-model first (`build_release_page`), then the template (templates/release.html.j2):
autoescaped, undefined names are errors, inline style admitted by its hash, no script, no
network; each benchmark links its run's own report.html by a relative path. release.md is
the same view-model as GitHub-flavoured Markdown, every cell escaped.

CI outputs, as `ab`'s (evals.report.ci_outputs): under GitHub Actions release.md goes into
the job summary and the verdict and each blocking benchmark that did not pass become
annotations (`::error` NO-GO, `::warning` INCONCLUSIVE and each warning, `::notice` GO);
under GitLab CI the path of junit.xml is printed and a dotenv report (`EVALS_VERDICT`,
`EVALS_EXIT_CODE`, `EVALS_RUN_ID`, `EVALS_REPORT`) is written to `$EVALS_DOTENV`, else to
<release>/verdict.env.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from markupsafe import Markup

from evals.record.release_record import ReleaseRecord
from evals.report._html import PACKAGE_DIR, _csp_hash, environment
from evals.report._outputs import _write_atomic
from evals.report.ci_writes import (DOTENV_ENV, DOTENV_FILE, TITLE, append_text, ci_systems,
                                    shown_path, warn_on_stderr, workflow_command, write_dotenv)
from evals.text_hygiene import escape_markdown, visible

RELEASE_PAGE = "release.html"
RELEASE_MARKDOWN = "release.md"
RELEASE_JUNIT = "junit.xml"
_CLASS = {"GO": "pass", "NO-GO": "regression", "INCONCLUSIVE": "inconclusive",
          "PASS": "pass", "REGRESSION": "regression"}
_LEVEL = {"GO": "notice", "NO-GO": "error", "INCONCLUSIVE": "warning"}


@dataclass(frozen=True, slots=True)
class BenchmarkRow:
    benchmark: str
    tier: str
    blocking: str
    status: str
    status_class: str
    margin: str
    delta: str
    interval: str
    pvalues: str
    run: str
    report_href: str | None
    age: str
    reason: str
    others: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReleasePage:
    title: str
    verdict: str
    verdict_class: str
    exit_code: str
    reason: str
    policy_file: str
    as_of: str
    method: str
    evidence: tuple[str, ...]
    rows: tuple[BenchmarkRow, ...]
    warnings: tuple[str, ...]


def _pts(x: float | None, signed: bool = True) -> str:
    if x is None:
        return "-"
    return f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}"


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _href(report: str | None, out_dir: Path) -> str | None:
    if not report:
        return None
    relative = os.path.relpath(Path(report).resolve(), Path(out_dir).resolve())
    return "/".join(quote(part) for part in Path(relative).parts)


def build_release_page(record: ReleaseRecord, out_dir: Path) -> ReleasePage:
    rows = []
    for b in record.benchmarks:
        rows.append(BenchmarkRow(
            benchmark=b.benchmark + (f" ({b.metric})" if b.metric and ":" not in b.benchmark
                                     else ""),
            tier=b.tier, blocking="blocks" if b.blocking else "warns", status=b.status,
            status_class=_CLASS.get(b.status, "inconclusive"),
            margin=(f"-{_pts(b.margin, False)} pts" + (f" ({b.margin_rule})" if "of the"
                    in b.margin_rule or "of baseline" in b.margin_rule else "")
                    if b.margin else b.margin_rule),
            delta=f"{_pts(b.delta)} pts" if b.delta is not None else "-",
            interval=(f"[{_pts(b.ci_low)}, {_pts(b.ci_high)}] pts"
                      if b.ci_low is not None and b.ci_high is not None else "-"),
            pvalues=(f"regression p adj {_p(b.regression_pvalue_adjusted)}; non-inferiority "
                     f"p {_p(b.noninferiority_pvalue)}"
                     if b.status in ("PASS", "REGRESSION", "INCONCLUSIVE") else "-"),
            run=b.run_id or "-", report_href=_href(b.report, out_dir),
            age="-" if b.age_days is None else f"{b.age_days:.1f} days",
            reason=b.reason, others=tuple(f"{o.run_id}: {o.why}" for o in b.other_runs)))
    policy = record.policy
    ev = policy.get("evidence") or {}
    evidence = tuple(text for key, text in (
        ("config_hash", f"config hash {ev.get('config_hash')}"),
        ("deployment", f"deployment {ev.get('deployment')}"),
        ("vllm", f"vLLM {ev.get('vllm')}"), ("hardware", f"hardware class {ev.get('hardware')}"),
        ("max_age_days", f"at most {ev.get('max_age_days') or 0:g} days old"),
        ("exercised", "every declared optimization exercised")) if ev.get(key))
    method = (f"alpha {record.alpha:g} one-sided; {record.correction} correction over the "
              f"blocking benchmarks' regression tests; blocking tiers: "
              f"{', '.join(record.blocking)}")
    return ReleasePage(
        title=f"release {record.verdict} \u2013 {record.release_id}", verdict=record.verdict,
        verdict_class=_CLASS[record.verdict], exit_code=str(record.exit_code),
        reason=record.reason, policy_file=record.policy_file, as_of=record.as_of,
        method=method, evidence=evidence, rows=tuple(rows), warnings=tuple(record.warnings))


def render_release_page(page: ReleasePage) -> str:
    css = (PACKAGE_DIR / "report.css").read_text(encoding="utf-8")
    policy = (f"default-src 'none'; style-src {_csp_hash(css)}; script-src 'none'; "
              "img-src data:; base-uri 'none'; form-action 'none'")
    return environment().get_template("release.html.j2").render(page=page, css=Markup(css),
                                                                 csp=policy)


def render_release_markdown(page: ReleasePage) -> str:
    e = escape_markdown
    lines = [f"## {TITLE}: release {e(page.verdict)} (exit code {page.exit_code})", "",
             e(page.reason), "",
             "| benchmark | tier | status | margin | delta | interval | run |",
             "|---|---|---|---|---|---|---|"]
    for r in page.rows:
        lines.append(f"| {e(r.benchmark)} | {e(r.tier)} ({r.blocking}) | **{e(r.status)}** | "
                     f"{e(r.margin)} | {e(r.delta)} | {e(r.interval)} | {e(r.run)} |")
    lines.append("")
    for r in page.rows:
        lines.append(f"- **{e(r.benchmark)}**: {e(r.reason)}")
        lines.extend(f"  - not used: {e(o)}" for o in r.others)
    if page.warnings:
        lines += ["", "Warnings:", ""] + [f"- {e(w)}" for w in page.warnings]
    lines += ["", f"Policy {e(page.policy_file)}, as of {e(page.as_of)}; {e(page.method)}.", ""]
    return "\n".join(lines)


def render_release_junit(record: ReleaseRecord) -> str:
    """One testcase per benchmark, laid out as a run's junit.xml (evals.report._junit, the
    Jenkins junit-10.xsd): a blocking benchmark's REGRESSION or evidence problem is a
    failure, its INCONCLUSIVE a skip; a benchmark that does not block always passes and
    says its status."""
    cases, failures, skipped = [], 0, 0
    for b in record.benchmarks:
        case = ET.Element("testcase", {
            "classname": f"{TITLE}.{record.release_id}.{b.tier}", "time": "0.000",
            "name": b.benchmark if b.blocking else f"{b.benchmark} (not blocking)"})
        text = f"{b.status}: {b.reason}" + "".join(
            f"\nnot used: {o.run_id}: {o.why}" for o in b.other_runs)
        if b.blocking and b.status in ("REGRESSION", "MISSING", "STALE", "MISMATCHED"):
            failures += 1
            ET.SubElement(case, "failure", {"type": b.status, "message": b.reason}).text = text
        elif b.blocking and b.status == "INCONCLUSIVE":
            skipped += 1
            ET.SubElement(case, "skipped", {"type": b.status, "message": b.reason})
            ET.SubElement(case, "system-out").text = text
        else:
            ET.SubElement(case, "system-out").text = text
        cases.append(case)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0"}
    root = ET.Element("testsuites", {"name": TITLE, **counts, "time": "0.000"})
    suite = ET.SubElement(root, "testsuite", {
        "name": f"{TITLE}.{record.release_id}", **counts, "skipped": str(skipped),
        "time": "0.000", "timestamp": record.created})
    properties = ET.SubElement(suite, "properties")
    for name, value in (("verdict", record.verdict), ("reason", record.reason),
                        ("exit_code", record.exit_code), ("kind", record.kind),
                        ("alpha", record.alpha), ("correction", record.correction),
                        ("suite_version", record.suite_version)):
        ET.SubElement(properties, "property", {"name": name, "value": str(value)})
    suite.extend(cases)
    for element in root.iter():  # XML 1.0 cannot hold most control characters
        element.text = visible(element.text) if element.text else element.text
        for key, value in element.attrib.items():
            element.attrib[key] = visible(value)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_release_outputs(record: ReleaseRecord, out_dir: Path) -> dict[str, Path]:
    """release.html, release.md and junit.xml in `out_dir`."""
    page = build_release_page(record, out_dir)
    texts = {RELEASE_PAGE: render_release_page(page),
             RELEASE_MARKDOWN: render_release_markdown(page),
             RELEASE_JUNIT: render_release_junit(record)}
    for name, text in texts.items():
        _write_atomic(Path(out_dir) / name, text)
    return {name: Path(out_dir) / name for name in texts}


def release_annotations(record: ReleaseRecord) -> list[str]:
    lines = [workflow_command(_LEVEL[record.verdict], f"{record.release_id}: {record.reason}",
                              f"{TITLE}: release {record.verdict} (exit {record.exit_code})")]
    for b in record.benchmarks:
        if b.blocking and b.status != "PASS":
            level = "warning" if b.status == "INCONCLUSIVE" else "error"
            lines.append(workflow_command(level, b.reason, f"{b.status}: {b.benchmark}"))
    lines.extend(workflow_command("warning", w, f"{TITLE}: release warning")
                 for w in record.warnings)
    return lines


def publish_release(record: ReleaseRecord, out_dir: Path,
                    environ: Mapping[str, str] | None = None, echo=print,
                    warn=warn_on_stderr) -> None:
    """The release's CI outputs (see the module docstring); a problem writing them is a
    warning, never another exit code."""
    environ = os.environ if environ is None else environ
    github, gitlab, step_summary = ci_systems(environ)
    out_dir = Path(out_dir)
    if step_summary:
        try:
            text = (out_dir / RELEASE_MARKDOWN).read_text(encoding="utf-8")
        except OSError as exc:
            warn(f"warning: {out_dir / RELEASE_MARKDOWN}: {exc.strerror}")
        else:
            append_text(step_summary, text.rstrip("\n") + "\n\n", warn)
    if github:
        for line in release_annotations(record):
            echo(line)
    if gitlab:
        echo(f"junit: {shown_path(out_dir / RELEASE_JUNIT)}")
        target = Path(environ.get(DOTENV_ENV) or out_dir / DOTENV_FILE)
        write_dotenv(target, {"EVALS_VERDICT": record.verdict,
                              "EVALS_EXIT_CODE": record.exit_code,
                              "EVALS_RUN_ID": record.release_id,
                              "EVALS_REPORT": shown_path(out_dir / RELEASE_PAGE)}, echo, warn)
