"""The README is a page, the docs are a shelf (issue 56): the README stays short, and it and
the docs' home list the same pages, each of which mkdocs.yml's nav builds."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _page_table(text: str, prefix: str) -> list[tuple[str, str, str]]:
    """(title, page, what it holds) of each row of the "| page | what it holds |" table."""
    table = text[text.index("| page | what it holds |"):].split("\n\n", 1)[0]
    rows = re.findall(r"^\| \[([^\]]+)\]\(" + re.escape(prefix) + r"([a-z_]+\.md)\) \| (.+) \|$",
                      table, re.M)
    assert len(rows) == table.count("\n") - 1, table  # every row but the header's two
    return rows


def test_the_readme_stays_a_page():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines; move detail into a docs/ page"


def test_the_readme_and_the_docs_home_list_the_same_pages_and_the_nav_builds_them():
    readme = _page_table((REPO / "README.md").read_text(encoding="utf-8"), "docs/")
    home = _page_table((REPO / "docs" / "index.md").read_text(encoding="utf-8"), "")
    assert readme == home and len(readme) >= 10
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    built = {page for entry in nav for page in entry.values()}
    assert {page for _, page, _ in readme} <= built
    assert all((REPO / "docs" / page).is_file() for page in built)
