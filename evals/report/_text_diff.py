"""The differing spans of two responses, for highlighting, computed with difflib.

Texts are split into words, runs of whitespace and single punctuation marks, so a
highlight covers whole words. The common prefix and suffix are trimmed before
`difflib.SequenceMatcher` runs (it is quadratic in the worst case); if the middle is
still long, or the matches break it into many small pieces, the whole middle is
one span: a readable highlight beats a precise but confetti-like one.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
MAX_DIFF_TOKENS = 1500
MAX_SPANS = 12


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    changed: bool


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _segments(tokens: list[str], spans: list[tuple[int, int]]) -> tuple[Segment, ...]:
    out: list[Segment] = []
    pos = 0
    for start, end in spans:
        if start > pos:
            out.append(Segment("".join(tokens[pos:start]), False))
        if end > start:
            out.append(Segment("".join(tokens[start:end]), True))
        pos = end
    if pos < len(tokens):
        out.append(Segment("".join(tokens[pos:]), False))
    return tuple(out)


def _merge(spans: list[tuple[int, int]], tokens: list[str]) -> list[tuple[int, int]]:
    """Joins spans separated only by whitespace or a single token."""
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged:
            gap = tokens[merged[-1][1]:start]
            if len(gap) <= 1 or all(g.isspace() for g in gap):
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
                continue
        merged.append((start, end))
    return merged


def diff_segments(a: str, b: str) -> tuple[tuple[Segment, ...], tuple[Segment, ...]]:
    """`a` and `b` cut into segments; `changed` marks what the other text does not share."""
    ta, tb = _tokens(a), _tokens(b)
    prefix = _common_prefix(ta, tb)
    suffix = _common_prefix(ta[prefix:][::-1], tb[prefix:][::-1])
    mid_a = (prefix, len(ta) - suffix)
    mid_b = (prefix, len(tb) - suffix)
    whole = ([mid_a], [mid_b])
    if max(mid_a[1] - mid_a[0], mid_b[1] - mid_b[0]) > MAX_DIFF_TOKENS:
        spans_a, spans_b = whole
    else:
        matcher = difflib.SequenceMatcher(None, ta[mid_a[0]:mid_a[1]], tb[mid_b[0]:mid_b[1]],
                                          autojunk=False)
        spans_a, spans_b = [], []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                spans_a.append((prefix + i1, prefix + i2))
                spans_b.append((prefix + j1, prefix + j2))
        spans_a = _merge([s for s in spans_a if s[1] > s[0]], ta)
        spans_b = _merge([s for s in spans_b if s[1] > s[0]], tb)
        if len(spans_a) > MAX_SPANS or len(spans_b) > MAX_SPANS:
            spans_a, spans_b = whole
    return _segments(ta, spans_a), _segments(tb, spans_b)
