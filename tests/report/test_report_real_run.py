"""The reports of a recorded real run (tests/fixtures/run_w4a16), when it is present."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from markupsafe import escape

from evals.report import write_reports
from evals.run_record import read_summary

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "run_w4a16"

pytestmark = pytest.mark.skipif(not (RECORDED / "summary.json").exists(),
                                reason=f"no recorded run at {RECORDED}")


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("real") / RECORDED.name
    shutil.copytree(RECORDED, run, ignore=shutil.ignore_patterns("report.html", "summary.md",
                                                                  "junit.xml"))
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


def test_real_run_opens_cleanly_in_the_browser(real_run, browser, artifacts):
    page = browser.page(width=1280, height=1600)
    page.goto((real_run / "report.html").as_uri())
    assert page.evaluate("document.getElementById('item-filter').hidden") is False
    assert page.console_errors() == []
    page.screenshot(artifacts / "report_real_run.png")
