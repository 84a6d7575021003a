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
(`study_line` for a study; `publish_study` writes a study's CI outputs).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from evals.decide.verdict import Verdict
from evals.errors import ExitCode, UserError
from evals.paths import STUDY_FILE, STUDY_MARKDOWN, STUDY_PAGE
from evals.record.run_record import SUMMARY_FILE, read_run_record
from evals.record.run_record_model import RunRecord
from evals.record.study_record import StudyRecord, read_study_record
from evals.report._markdown import escape_markdown
from evals.report._outputs import HTML_FILE, JUNIT_FILE, MARKDOWN_FILE
from evals.text_hygiene import one_line, visible

TITLE = "vllm-regression-evals"
DOTENV_FILE = "verdict.env"
DOTENV_ENV = "EVALS_DOTENV"
_LEVELS = {Verdict.PASS: "notice", Verdict.REGRESSION: "error", Verdict.INCONCLUSIVE: "warning"}
_FAILURES = {ExitCode.BAD_INPUT: "BAD_INPUT", ExitCode.RUN_FAILED: "RUN_FAILED"}
_DOTENV_UNSAFE = re.compile(r"[^A-Za-z0-9_.,:/+=@-]")


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


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(level: str, message: str, title: str) -> str:
    """One GitHub Actions annotation, escaped as @actions/core's `issueCommand` does."""
    return f"::{level} title={_escape_property(visible(title))}::{_escape_data(visible(message))}"


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


def dotenv_text(values: Mapping[str, str]) -> str:
    """KEY=value lines GitLab reads as a dotenv report: one line each, no quotes, no `$`
    (GitLab would expand it); any other character is replaced by `_`."""
    return "".join(f"{key}={_DOTENV_UNSAFE.sub('_', str(value))}\n"
                   for key, value in values.items())


def _shown_path(path: Path) -> str:
    """Relative to the working directory when below it (what a CI job's paths are)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _append(path: str, text: str, warn: Callable[[str], None]) -> None:
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        warn(f"warning: could not append to $GITHUB_STEP_SUMMARY ({path}): {exc.strerror}")


def _write_dotenv(path: Path, values: dict, echo, warn) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dotenv_text(values), encoding="utf-8")
    except OSError as exc:
        warn(f"warning: could not write the dotenv report {path}: {exc.strerror}")
        return
    echo(f"dotenv: {_shown_path(path)}")


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def _ci_systems(environ: Mapping[str, str]) -> tuple[bool, bool, str | None]:
    """Under GitHub Actions, under GitLab CI, and the job summary file (if any)."""
    return (environ.get("GITHUB_ACTIONS") == "true", bool(environ.get("GITLAB_CI")),
            environ.get("GITHUB_STEP_SUMMARY"))


def _append_file(step_summary: str, markdown: Path, warn) -> None:
    try:
        text = markdown.read_text(encoding="utf-8")
    except OSError as exc:
        warn(f"warning: {markdown}: {exc.strerror}")
    else:
        _append(step_summary, text.rstrip("\n") + "\n\n", warn)


def publish_run(run_dir: Path, environ: Mapping[str, str] | None = None, echo=print,
                warn=_warn) -> None:
    """The CI outputs of a finished run (see the module docstring). A problem writing them
    is a warning: it never changes the run's exit code."""
    environ = os.environ if environ is None else environ
    github, gitlab, step_summary = _ci_systems(environ)
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
        echo(f"junit: {_shown_path(run_dir / JUNIT_FILE)}")
        target = Path(environ.get(DOTENV_ENV) or run_dir / DOTENV_FILE)
        _write_dotenv(target, {"EVALS_VERDICT": verdict.value, "EVALS_EXIT_CODE": int(code),
                               "EVALS_RUN_ID": summary.run_id,
                               "EVALS_REPORT": _shown_path(run_dir / HTML_FILE)}, echo, warn)


def publish_failure(code: ExitCode, message: str, environ: Mapping[str, str] | None = None,
                    echo=print, warn=_warn) -> None:
    """A run that ended without a verdict (bad input, exit 2; a failed run, exit 4): an
    `::error` annotation and a section in the job summary on GitHub; on GitLab the dotenv
    (only where `$EVALS_DOTENV` names it: there is no run directory)."""
    environ = os.environ if environ is None else environ
    name = _FAILURES.get(ExitCode(code), "RUN_FAILED")
    what = "bad input" if name == "BAD_INPUT" else "run failed"
    if environ.get("GITHUB_ACTIONS") == "true":
        echo(workflow_command("error", message, f"{TITLE}: {what} (exit {int(code)})"))
    if environ.get("GITHUB_STEP_SUMMARY"):
        _append(environ["GITHUB_STEP_SUMMARY"],
                f"## {TITLE}: {what} (exit code {int(code)})\n\n{escape_markdown(message)}\n\n",
                warn)
    if environ.get("GITLAB_CI") and environ.get(DOTENV_ENV):
        _write_dotenv(Path(environ[DOTENV_ENV]),
                      {"EVALS_VERDICT": name, "EVALS_EXIT_CODE": int(code)}, echo, warn)


def study_line(study: StudyRecord) -> str:
    """A study's one-line verdict: 'REGRESSION exit=1 <study-id>: <reason>'."""
    return (f"{study.verdict} exit={study.exit_code} {one_line(study.run_id)}: "
            f"{one_line(study.reason)}")


def publish_study(study_dir: Path, environ: Mapping[str, str] | None = None, echo=print,
                  warn=_warn) -> None:
    """A study's CI outputs: study.md in the job summary, the study's verdict and each
    comparison's annotations on GitHub; each comparison's junit.xml and the study's verdict
    as the dotenv on GitLab."""
    environ = os.environ if environ is None else environ
    github, gitlab, step_summary = _ci_systems(environ)
    if not (github or gitlab or step_summary):
        return
    study_dir = Path(study_dir)
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
            echo(f"junit: {_shown_path(run_dir / JUNIT_FILE)}")
        target = Path(environ.get(DOTENV_ENV) or study_dir / DOTENV_FILE)
        _write_dotenv(target, {"EVALS_VERDICT": study.verdict,
                               "EVALS_EXIT_CODE": study.exit_code,
                               "EVALS_RUN_ID": study.run_id,
                               "EVALS_REPORT": _shown_path(study_dir / STUDY_PAGE)}, echo, warn)
