"""study.html in a real browser (headless Chromium): the matrix and the interaction panel
render under the page's Content-Security-Policy, text from runs stays text, and each arm
links to its comparison's own report."""

from __future__ import annotations

import pytest
from synthetic_runs import study_record

from evals.record.study_record import StudyRecord
from evals.report.study import write_study_page


@pytest.fixture
def page(browser, tmp_path):
    record = study_record()
    record["comparisons"][0]["reason"] = "<img src=x onerror=\"window.__pwned=1\">"
    path = write_study_page(StudyRecord.model_validate(record), tmp_path / "study.html")
    tab = browser.page(width=1280, height=1200)
    tab.goto(path.as_uri())
    return tab


def test_study_page_renders_under_its_policy_and_keeps_text_inert(page):
    assert page.console_errors() == []
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('img, b, script').length") == 0
    color = page.evaluate("getComputedStyle(document.querySelector('.banner')).borderTopColor")
    assert color == "rgb(207, 34, 46)"  # the regression red: the stylesheet applied
    rows = page.evaluate("""Array.from(document.querySelectorAll('#matrix tbody tr'))
        .map(tr => Array.from(tr.cells).map(td => td.innerText.trim()))""")
    assert len(rows) == 2 and rows[0][0].startswith("prefix_caching=on+decoding=mtp")
    assert "-10.0 [-13.0, -7.0]" in rows[0][1] and rows[1][1] == "-"
    assert "onerror" in rows[0][-1]  # shown as text
    href = page.evaluate("document.querySelector('#matrix tbody a').getAttribute('href')")
    assert href == "comparisons/prefix_caching%3Don%2Bdecoding%3Dmtp/report.html"
    panel = page.evaluate("document.getElementById('interactions').innerText")
    assert "appears only with the combination" in panel and "t<b>" in panel
