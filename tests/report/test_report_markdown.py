"""summary.md: short, link-free, and safe to paste into a PR comment."""

from __future__ import annotations

import itertools
import re

import pytest
from fake_runs import XSS_RESPONSE

from evals.report._markdown import escape_markdown


@pytest.fixture(scope="module")
def markdown(regression_run) -> str:
    return (regression_run / "summary.md").read_text(encoding="utf-8")


def test_verdict_table_and_reasons(markdown):
    assert markdown.startswith("## vllm-regression-evals: REGRESSION\n")
    assert "**Verdict: REGRESSION**: regression in gsm8k\\_tiny" in markdown
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| task | metric"))
    table = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    assert len(table) == 2 + 3
    assert all(len(re.findall(r"(?<!\\)\|", line)) == 12 for line in table)
    assert "| gsm8k\\_tiny | exact\\_match | 60 | 0.750 | 0.567 | -18.3 |" in markdown
    assert "**REGRESSION**" in markdown and "**INCONCLUSIVE**" in markdown
    assert ("Speed: candidate 1.60x faster in generated tokens per second (candidate 69.3 vs "
            "baseline 43.3, over 3 task(s), task wall time).") in markdown
    assert "Flipped items: 29 changed score" in markdown
    assert len(markdown.splitlines()) < 40


def test_task_names_cannot_inject_markdown_or_html(markdown):
    assert "edge\\|&lt;i&gt;name&lt;/i&gt;\\`x\\` (not gated)" in markdown
    assert "<i>" not in markdown and "`x`" not in markdown


def test_no_model_text_and_no_links(markdown):
    assert XSS_RESPONSE not in markdown and "__pwned" not in markdown
    assert "http" not in markdown and "](" not in markdown


@pytest.mark.parametrize("raw, escaped", [
    ("a|b", "a\\|b"),
    ("<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"),
    ("`code` *em* _u_ [l](u) ~s~", "\\`code\\` \\*em\\* \\_u\\_ \\[l\\](u) \\~s\\~"),
    ("two\nlines\r\n| x", "two lines \\| x"),
    ("a & b \\ c", "a &amp; b \\\\ c"),
])
def test_escape_markdown(raw, escaped):
    assert escape_markdown(raw) == escaped


def test_the_distribution_shift_table(markdown):
    assert "Distribution shift (`gate.logprob: warn`):" in markdown
    row = next(line for line in markdown.splitlines()
               if line.startswith("| boolq\\_tiny | per-choice"))
    assert len(re.findall(r"(?<!\\)\|", row)) == 6 and "no A/A rerun" in row
