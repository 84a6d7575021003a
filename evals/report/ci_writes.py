"""How the suite writes to CI systems - GitHub Actions workflow commands, the job summary,
GitLab's dotenv report - and the outputs of a run that ended without a verdict (bad input,
a failed run). Imports nothing heavy: `python -m evals` writes these on its way out of a
bad-input exit, which takes a fraction of a second (evals.report.ci_outputs writes a
finished run's outputs from its records)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from evals.errors import ExitCode
from evals.text_hygiene import escape_markdown, visible

TITLE = "vllm-regression-evals"
DOTENV_FILE = "verdict.env"
DOTENV_ENV = "EVALS_DOTENV"
_FAILURES = {ExitCode.BAD_INPUT: "BAD_INPUT", ExitCode.RUN_FAILED: "RUN_FAILED"}
_DOTENV_UNSAFE = re.compile(r"[^A-Za-z0-9_.,:/+=@-]")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(level: str, message: str, title: str) -> str:
    """One GitHub Actions annotation, escaped as @actions/core's `issueCommand` does."""
    return f"::{level} title={_escape_property(visible(title))}::{_escape_data(visible(message))}"


def dotenv_text(values: Mapping[str, str]) -> str:
    """KEY=value lines GitLab reads as a dotenv report: one line each, no quotes, no `$`
    (GitLab would expand it); any other character is replaced by `_`."""
    return "".join(f"{key}={_DOTENV_UNSAFE.sub('_', str(value))}\n"
                   for key, value in values.items())


def shown_path(path: Path) -> str:
    """Relative to the working directory when below it (what a CI job's paths are)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def append_text(path: str, text: str, warn: Callable[[str], None]) -> None:
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        warn(f"warning: could not append to $GITHUB_STEP_SUMMARY ({path}): {exc.strerror}")


def write_dotenv(path: Path, values: dict, echo, warn) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dotenv_text(values), encoding="utf-8")
    except OSError as exc:
        warn(f"warning: could not write the dotenv report {path}: {exc.strerror}")
        return
    echo(f"dotenv: {shown_path(path)}")


def warn_on_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def ci_systems(environ: Mapping[str, str]) -> tuple[bool, bool, str | None]:
    """Under GitHub Actions, under GitLab CI, and the job summary file (if any)."""
    return (environ.get("GITHUB_ACTIONS") == "true", bool(environ.get("GITLAB_CI")),
            environ.get("GITHUB_STEP_SUMMARY"))


def publish_failure(code: ExitCode, message: str, environ: Mapping[str, str] | None = None,
                    echo=print, warn=warn_on_stderr) -> None:
    """A run that ended without a verdict (bad input, exit 2; a failed run, exit 4): an
    `::error` annotation and a section in the job summary on GitHub; on GitLab the dotenv
    (only where `$EVALS_DOTENV` names it: there is no run directory)."""
    environ = os.environ if environ is None else environ
    name = _FAILURES.get(ExitCode(code), "RUN_FAILED")
    what = "bad input" if name == "BAD_INPUT" else "run failed"
    if environ.get("GITHUB_ACTIONS") == "true":
        echo(workflow_command("error", message, f"{TITLE}: {what} (exit {int(code)})"))
    if environ.get("GITHUB_STEP_SUMMARY"):
        append_text(environ["GITHUB_STEP_SUMMARY"],
                f"## {TITLE}: {what} (exit code {int(code)})\n\n{escape_markdown(message)}\n\n",
                warn)
    if environ.get("GITLAB_CI") and environ.get(DOTENV_ENV):
        write_dotenv(Path(environ[DOTENV_ENV]),
                      {"EVALS_VERDICT": name, "EVALS_EXIT_CODE": int(code)}, echo, warn)
