"""Text from a model, a dataset or a config shown where control characters do harm.

`visible` turns control characters (C0 and C1, ESC sequences included, except newline
and tab) and the Unicode bidirectional controls (embeddings, overrides, isolates, marks)
into visible escapes such as `\\x1b` or `\\u202e`: on a terminal an ANSI sequence cannot
recolour or hide the verdict, in XML the file stays well-formed, and a right-to-left
override cannot turn "REGRESSION" into "NOISSERGER" anywhere. Ordinary right-to-left
text (Arabic, Hebrew) is left alone; only the invisible controls are shown.
"""

from __future__ import annotations

import re

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value) -> str:
    """`value` as text with every control character shown as an escape."""
    text = value if isinstance(value, str) else str(value)
    return _CONTROLS.sub(_escape, text)


def one_line(value) -> str:
    """Text on one line with control characters shown as escapes."""
    return visible(" ".join(str(value).split()))


_BACKSLASHED = re.compile(r"([\\`*_\[\]|~])")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def escape_markdown(value) -> str:
    """Text that GitHub-flavoured Markdown shows literally, on one line (the report's
    summary.md and the CI job summary)."""
    text = visible(" ".join(str(value).split()))
    text = "".join(_ENTITIES.get(ch, ch) for ch in text)
    return _BACKSLASHED.sub(r"\\\1", text)
