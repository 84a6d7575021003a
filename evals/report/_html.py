"""Renders the report page to one self-contained HTML file.

Templates live in `templates/` (one per section); the stylesheet and the small
filtering script are package files inlined into the page. Autoescaping is on and
undefined names are errors. The page's Content-Security-Policy admits only its own
inline style and script (by hash) and no network at all, so even text that slipped
past escaping could neither run nor load anything.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from pathlib import Path

import jinja2
from markupsafe import Markup

from evals.report._page import ReportPage
from evals.text_hygiene import visible

PACKAGE_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = PACKAGE_DIR / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    # every printed value passes `_shown` before autoescaping: control and bidi characters
    # become visible escapes, so no text from a run can reorder or hide what is around it
    # jinja's own bytecode cache (a private folder in the temporary directory, keyed by each
    # template's source): a report no longer compiles its templates every run (~0.2 s)
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        finalize=_shown, bytecode_cache=jinja2.FileSystemBytecodeCache())


def _shown(value):
    if isinstance(value, Markup):  # our own package files (CSS, JS), inlined on purpose
        return value
    return visible(value) if isinstance(value, str) else value


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def render_html(page: ReportPage) -> str:
    css = (PACKAGE_DIR / "report.css").read_text(encoding="utf-8")
    js = (PACKAGE_DIR / "report.js").read_text(encoding="utf-8")
    policy = (f"default-src 'none'; style-src {_csp_hash(css)}; script-src {_csp_hash(js)}; "
              "img-src data:; base-uri 'none'; form-action 'none'")
    # Markup only for our own package files, never for anything read from a run
    return environment().get_template("report.html.j2").render(
        page=page, css=Markup(css), js=Markup(js), csp=policy)
