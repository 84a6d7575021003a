"""report.html in a real browser (headless Chromium): injected text stays inert, the
page's own style and script run under its Content-Security-Policy, filters work."""

from __future__ import annotations

import json

import pytest
from fake_runs import XSS_RESPONSE

VISIBLE_ITEMS = """Array.from(document.querySelectorAll('#flipped-list > .item'))
  .filter(el => el.getClientRects().length > 0)
  .map(el => [el.dataset.task, el.dataset.direction])"""


@pytest.fixture
def page(browser, regression_run):
    tab = browser.page(width=1280, height=1600)
    tab.goto((regression_run / "report.html").as_uri())
    return tab


def _select(page, element_id: str, value: str) -> None:
    # what choosing an option does: set the value, fire the change event
    page.evaluate(f"""(() => {{ const s = document.getElementById({json.dumps(element_id)});
        s.value = {json.dumps(value)};
        s.dispatchEvent(new Event('change', {{bubbles: true}})); }})()""")


def test_injected_script_does_not_run_and_shows_as_text(page):
    assert page.evaluate("typeof window.__pwned") == "undefined"
    scripts = page.evaluate("Array.from(document.scripts).map(s => s.textContent)")
    assert len(scripts) == 1 and "__pwned" not in scripts[0]
    assert page.evaluate("document.querySelectorAll('b, img, em, i').length") == 0
    assert XSS_RESPONSE in page.evaluate("document.getElementById('items').innerText")
    assert page.console_errors() == []


def test_the_distribution_shift_section_shows_the_choice_task(page):
    text = page.evaluate("document.getElementById('shift').innerText")
    assert "boolq_tiny" in text and "per-choice log-likelihoods" in text
    assert "no A/A rerun of the baseline" in text  # described, not tested
    assert "gsm8k_tiny: no shift panel" in text  # a generation task without logprobs
    assert page.console_errors() == []


def test_page_style_and_script_are_allowed_by_its_policy(page):
    color = page.evaluate(
        "getComputedStyle(document.querySelector('.banner')).borderTopColor")
    assert color == "rgb(207, 34, 46)"  # the regression red: the stylesheet applied
    assert page.evaluate("document.getElementById('item-filter').hidden") is False
    assert page.evaluate("document.getElementById('filter-count').textContent") == \
        "29 of 29 shown"


def test_direction_filter_hides_the_other_direction(page):
    assert len(page.evaluate(VISIBLE_ITEMS)) == 29
    _select(page, "filter-direction", "w2c")
    visible = page.evaluate(VISIBLE_ITEMS)
    assert len(visible) == 1 + 3 + 6
    assert {d for _, d in visible} == {"w2c"}
    _select(page, "filter-direction", "c2w")
    visible = page.evaluate(VISIBLE_ITEMS)
    assert len(visible) == 12 + 2 + 5 and {d for _, d in visible} == {"c2w"}
    _select(page, "filter-task", "boolq_tiny")
    assert page.evaluate(VISIBLE_ITEMS) == [["boolq_tiny", "c2w"]] * 2
    assert page.evaluate("document.getElementById('filter-count').textContent") == \
        "2 of 29 shown"


def test_text_search_typed_into_the_box(page):
    page.evaluate("document.getElementById('filter-text').focus()")
    page.insert_text("__PWNED")  # case-insensitive, matches the response text
    assert page.evaluate(VISIBLE_ITEMS) == [["gsm8k_tiny", "c2w"]]


def test_only_differing_engine_config_rows_are_shown_by_default(page):
    rows = page.evaluate("""Array.from(document.querySelectorAll('#arms-effective tbody tr'))
        .filter(tr => tr.getClientRects().length > 0).length""")
    assert rows == 3
    page.evaluate("document.querySelector('#arms-effective .only-diff-toggle').click()")
    rows = page.evaluate("""Array.from(document.querySelectorAll('#arms-effective tbody tr'))
        .filter(tr => tr.getClientRects().length > 0).length""")
    assert rows == 9


def test_screenshot(page, artifacts):
    path = artifacts / "report.png"
    page.screenshot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 20_000
