"""What CI systems read from a finished run, written once at the end of `ab`, `drift` and
`compare` (evals.cli) from the run's stored summary.json and summary.md. Outside CI it
does nothing.

- GitHub Actions: summary.md is appended to the job summary whenever
  `$GITHUB_STEP_SUMMARY` names one, and under `GITHUB_ACTIONS=true` the verdict becomes
  workflow-command annotations on stdout: `::error` for REGRESSION and for a run that failed or got bad input,
  `::warning` for INCONCLUSIVE, `::notice` for PASS; one more for each gated task that
  did not pass. Task names and reasons come from users' configs and the run's data, so
  messages are escaped as the Actions toolkit escapes them (`%`, CR and LF; in a title
  also `:` and `,`): a name cannot end a command or start another.
- GitLab CI (`GITLAB_CI` set): the verdict as a dotenv report (`EVALS_VERDICT`,
  `EVALS_EXIT_CODE`, `EVALS_RUN_ID`, `EVALS_REPORT`) written to `$EVALS_DOTENV` when
  set (a fixed path the job's `artifacts:reports:dotenv` names), else to
  `<run dir>/verdict.env`; the paths of junit.xml and of the dotenv are printed.

`verdict_line` is the one-line verdict that `python -m evals gate-config` prints
(`study_line` for a study; `publish_study` writes a study's CI outputs). The writers
themselves, and the outputs of a run that ended without a verdict, are
evals.report.ci_writes (light to import: a bad-input exit needs only them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from evals.decide.outcome import Verdict
from evals.errors import ExitCode, UserError
from evals.paths import STUDY_FILE, STUDY_MARKDOWN, STUDY_PAGE
from evals.record.run_record import SUMMARY_FILE, read_run_record
from evals.record.run_record_model import RunRecord
from evals.report._outputs import HTML_FILE, JUNIT_FILE, MARKDOWN_FILE
from evals.report.ci_writes import (DOTENV_ENV, DOTENV_FILE, TITLE, append_text, ci_systems,
                                    shown_path, warn_on_stderr, write_dotenv, dotenv_text,
                                    publish_failure, workflow_command)
from evals.text_hygiene import one_line

if TYPE_CHECKING:  # a run's outputs need no study record (pydantic models, ~40 ms)
    from evals.record.study_record import StudyRecord

__all__ = ["annotations", "dotenv_text", "publish_failure", "publish_run", "publish_study",
           "run_outcome", "study_line", "verdict_line", "workflow_command"]

_LEVELS = {Verdict.PASS: "notice", Verdict.REGRESSION: "error", Verdict.INCONCLUSIVE: "warning"}


def run_outcome(summary: RunRecord, where: Path) -> tuple[Verdict, ExitCode]:
    """The run's verdict and exit code, refused (UserError) unless they agree: a summary
    whose code is not its verdict's was damaged or written by something else."""
    verdict, code = summary.verdict, summary.exit_code  # the reader refused other verdicts
    expected = Verdict[verdict].exit_code
    if code != int(expected):
        raise UserError(f"{where}: exit_code {code} does not match verdict {verdict} (exit "
                        f"{int(expected)}); the file was damaged or edited.")
    return Verdict[verdict], expected


def verdict_line(summary: RunRecord, where: Path) -> str:
    """'REGRESSION exit=1 <run-id>: <reason>', the verdict a stdout-only CI system reads."""
    verdict, code = run_outcome(summary, where)
    return f"{verdict.value} exit={int(code)} {one_line(summary.run_id)}: " \
           f"{one_line(summary.reason)}"


def annotations(summary: RunRecord, where: Path) -> list[str]:
    """The run's verdict first, then each gated task that did not pass."""
    verdict, code = run_outcome(summary, where)
    lines = [workflow_command(_LEVELS[verdict], f"{summary.run_id}: {summary.reason}",
                              f"{TITLE}: {verdict.value} (exit {int(code)})")]
    for task in summary.tasks:
        if task.gated and task.verdict in ("REGRESSION", "INCONCLUSIVE"):
            lines.append(workflow_command(_LEVELS[Verdict[task.verdict]], task.reason or "",
                                          f"{task.verdict}: {task.task}"))
    return lines


def _append_file(step_summary: str, markdown: Path, warn) -> None:
    try:
        text = markdown.read_text(encoding="utf-8")
    except OSError as exc:
        warn(f"warning: {markdown}: {exc.strerror}")
    else:
        append_text(step_summary, text.rstrip("\n") + "\n\n", warn)


def publish_run(run_dir: Path, environ: Mapping[str, str] | None = None, echo=print,
                warn=warn_on_stderr) -> None:
    """The CI outputs of a finished run (see the module docstring). A problem writing them
    is a warning: it never changes the run's exit code."""
    environ = os.environ if environ is None else environ
    github, gitlab, step_summary = ci_systems(environ)
    if not (github or gitlab or step_summary):
        return
    run_dir = Path(run_dir)
    try:
        summary = read_run_record(run_dir)
        verdict, code = run_outcome(summary, run_dir / SUMMARY_FILE)
    except UserError as exc:
        warn(f"warning: no CI outputs: {exc}")
        return
    if step_summary:
        _append_file(step_summary, run_dir / MARKDOWN_FILE, warn)
    if github:
        for line in annotations(summary, run_dir / SUMMARY_FILE):
            echo(line)
    if gitlab:
        echo(f"junit: {shown_path(run_dir / JUNIT_FILE)}")
        target = Path(environ.get(DOTENV_ENV) or run_dir / DOTENV_FILE)
        write_dotenv(target, {"EVALS_VERDICT": verdict.value, "EVALS_EXIT_CODE": int(code),
                               "EVALS_RUN_ID": summary.run_id,
                               "EVALS_REPORT": shown_path(run_dir / HTML_FILE)}, echo, warn)


def study_line(study: StudyRecord) -> str:
    """A study's one-line verdict: 'REGRESSION exit=1 <study-id>: <reason>'."""
    return (f"{study.verdict} exit={study.exit_code} {one_line(study.run_id)}: "
            f"{one_line(study.reason)}")


def publish_study(study_dir: Path, environ: Mapping[str, str] | None = None, echo=print,
                  warn=warn_on_stderr) -> None:
    """A study's CI outputs: study.md in the job summary, the study's verdict and each
    comparison's annotations on GitHub; each comparison's junit.xml and the study's verdict
    as the dotenv on GitLab."""
    environ = os.environ if environ is None else environ
    github, gitlab, step_summary = ci_systems(environ)
    if not (github or gitlab or step_summary):
        return
    study_dir = Path(study_dir)
    from evals.record.study_record import read_study_record

    try:
        study = read_study_record(study_dir / STUDY_FILE)
    except UserError as exc:
        warn(f"warning: no CI outputs: {exc}")
        return
    comparisons = [study_dir / c.dir for c in study.comparisons if c.dir]
    if step_summary:
        _append_file(step_summary, study_dir / STUDY_MARKDOWN, warn)
    if github:
        code = ExitCode(study.exit_code)
        level = {ExitCode.PASS: "notice", ExitCode.INCONCLUSIVE: "warning"}.get(code, "error")
        echo(workflow_command(level, f"{study.run_id}: {study.reason}",
                              f"{TITLE}: study {study.verdict} (exit {int(code)})"))
        for run_dir in comparisons:
            try:
                lines = annotations(read_run_record(run_dir), run_dir / SUMMARY_FILE)
            except UserError as exc:
                warn(f"warning: no annotations for {run_dir.name}: {exc}")
                continue
            for line in lines:
                echo(line)
    if gitlab:
        for run_dir in comparisons:
            echo(f"junit: {shown_path(run_dir / JUNIT_FILE)}")
        target = Path(environ.get(DOTENV_ENV) or study_dir / DOTENV_FILE)
        write_dotenv(target, {"EVALS_VERDICT": study.verdict,
                               "EVALS_EXIT_CODE": study.exit_code,
                               "EVALS_RUN_ID": study.run_id,
                               "EVALS_REPORT": shown_path(study_dir / STUDY_PAGE)}, echo, warn)
