"""The differing spans of two responses, for highlighting, computed with difflib.

Texts are split into words and single punctuation marks, each with the whitespace
that follows it, so a highlight covers whole words. The common prefix and suffix are
trimmed before `difflib.SequenceMatcher` runs with its "popular element" heuristic
(tokens making up over 1 % of a long text, such as a generation stuck in a loop, do
not seed matches). Its cost grows with the pairs of equal non-popular tokens across
the texts; past `MAX_MATCH_WORK` such pairs, or when the matches break the middle
into many small pieces, the whole middle is one span: a readable, bounded-time
highlight beats a precise but confetti-like one.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

_TOKEN = re.compile(r"\w+\s*|[^\w\s]\s*|\s+")
MAX_MATCH_WORK = 20_000
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


def _match_work(a: list[str], b: list[str]) -> int:
    """Pairs of equal tokens across `a` and `b` that one longest-match scan touches,
    leaving out the tokens SequenceMatcher's autojunk treats as popular."""
    counts = Counter(b)
    if len(b) >= 200:
        popular = len(b) // 100 + 1
        counts = Counter({t: c for t, c in counts.items() if c <= popular})
    return sum(counts[t] for t in a)


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
    """Joins spans separated by at most one token."""
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged:
            gap = tokens[merged[-1][1]:start]
            if len(gap) <= 1:
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
    if _match_work(ta[mid_a[0]:mid_a[1]], tb[mid_b[0]:mid_b[1]]) > MAX_MATCH_WORK:
        spans_a, spans_b = whole
    else:
        matcher = difflib.SequenceMatcher(None, ta[mid_a[0]:mid_a[1]], tb[mid_b[0]:mid_b[1]])
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
