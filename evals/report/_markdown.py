"""summary.md: the verdict and the task table, short enough for a CI job summary or PR comment.

Every value the template prints goes through `escape_markdown` (evals.text_hygiene; the
environment's `finalize`), the Markdown counterpart of HTML autoescaping: task names and
reasons can neither open a table cell, emphasis or code span, nor inject HTML. The template
never starts a line with a value, so block syntax (`#`, `-`, `1.`) cannot trigger.
"""

from __future__ import annotations

from functools import lru_cache

import jinja2

from evals.report._html import TEMPLATES_DIR
from evals.report._page import ReportPage
from evals.text_hygiene import escape_markdown

__all__ = ["escape_markdown", "render_markdown"]


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=False,
        finalize=escape_markdown, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True, keep_trailing_newline=True,
        bytecode_cache=jinja2.FileSystemBytecodeCache())  # as evals.report._html's


def render_markdown(page: ReportPage) -> str:
    return environment().get_template("summary.md.j2").render(page=page)
