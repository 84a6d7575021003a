"""The reports of a recorded real run (tests/fixtures/run_w4a16), when it is present."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from markupsafe import escape

from evals.report import write_reports
from evals.record.run_record import read_summary

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "run_w4a16"

pytestmark = pytest.mark.skipif(not (RECORDED / "summary.json").exists(),
                                reason=f"no recorded run at {RECORDED}")


INJECTED = '<script>window.__pwned_real=1</script><img src=x onerror="window.__pwned_real=2">'


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    """The recorded run, with one real flipped generation turned into an injection attempt."""
    run = tmp_path_factory.mktemp("real") / RECORDED.name
    shutil.copytree(RECORDED, run, ignore=shutil.ignore_patterns("report.html", "summary.md",
                                                                  "junit.xml"))
    items = run / "paired_items.jsonl"
    lines = items.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines[1:], 1):
        row = json.loads(line)
        if row["baseline"] > row["candidate"]:
            row["candidate_response"] = INJECTED + row["candidate_response"]
            lines[index] = json.dumps(row, ensure_ascii=False)
            break
    items.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_reports(run)
    return run


def test_real_run_reports(real_run):
    summary = read_summary(real_run)
    html = (real_run / "report.html").read_text(encoding="utf-8")
    assert f'class="banner {summary["verdict"].lower()}"' in html
    for task in summary["tasks"]:
        assert f"<td>{escape(task['task'])}" in html
    assert html.count("<script") == 1
    assert (real_run / "report.html").stat().st_size < 5 * 1024 * 1024
    markdown = (real_run / "summary.md").read_text(encoding="utf-8")
    assert markdown.startswith(f"## vllm-regression-evals: {summary['verdict']}")
    suite = ET.parse(real_run / "junit.xml").getroot().find("testsuite")
    assert int(suite.get("tests")) == len(summary["tasks"])
    assert int(suite.get("failures")) == sum(
        t["verdict"] == "REGRESSION" and t["gated"] for t in summary["tasks"])
    if summary.get("kind") == "ab":
        assert "Effective engine config" in html
        assert re.search(r"rows differ", html)


# the rendered text of the item holding the injection, after scrolling it into view and
# waiting two frames (the browser decides which skipped content to render in a frame)
INJECTED_ITEM_TEXT = """(async () => {
  const item = Array.from(document.querySelectorAll('#flipped-list > .item'))
    .find(el => el.textContent.includes('__pwned_real'));
  item.scrollIntoView();
  for (let i = 0; i < 2; i++) await new Promise(r => requestAnimationFrame(r));
  return item.innerText; })()"""

VISIBLE = """Array.from(document.querySelectorAll('#flipped-list > .item'))
  .filter(el => el.getClientRects().length > 0).map(el => el.dataset.direction)"""


def test_real_run_opens_cleanly_in_the_browser(real_run, browser, artifacts):
    summary = read_summary(real_run)
    page = browser.page(width=1280, height=1600)
    page.goto((real_run / "report.html").as_uri())
    assert page.evaluate("document.getElementById('item-filter').hidden") is False
    assert page.console_errors() == []
    # verdict, tables and the forest plot are rendered and visible
    banner = page.evaluate("document.querySelector('.banner').innerText")
    assert summary["verdict"] in banner
    assert page.evaluate("document.querySelectorAll('table').length") >= 3
    assert page.evaluate("document.querySelector('svg').getBoundingClientRect().height") > 50
    # the injected markup in a real generation stays text, rendered as such once a reader
    # scrolls to its item (items render on arrival: `content-visibility: auto`)
    assert page.evaluate("typeof window.__pwned_real") == "undefined"
    assert INJECTED in page.evaluate(INJECTED_ITEM_TEXT)
    # filtering by direction shows only that direction
    flips = sum(t["correct_to_wrong"] + t["wrong_to_correct"] for t in summary["tasks"])
    assert len(page.evaluate(VISIBLE)) == flips
    page.evaluate("""(() => { const s = document.getElementById('filter-direction');
        s.value = 'w2c'; s.dispatchEvent(new Event('change', {bubbles: true})); })()""")
    shown = page.evaluate(VISIBLE)
    assert shown and set(shown) == {"w2c"}
    assert len(shown) == sum(t["wrong_to_correct"] for t in summary["tasks"])
    page.screenshot(artifacts / "report_real_run.png")
