"""junit.xml: one testcase per task; REGRESSION fails, INCONCLUSIVE skips, PASS passes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fake_runs import ODD_TASK

from evals.report._junit import render_junit
from evals.record.run_record import read_summary
from evals.record.run_record_model import RunRecord

SCHEMA = Path(__file__).parent / "schemas" / "junit-10.xsd"


def _suite(run_dir: Path) -> ET.Element:
    root = ET.parse(run_dir / "junit.xml").getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    return suites[0]


def _counts_match(suite: ET.Element) -> None:
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
    assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
    assert int(suite.get("errors")) == 0


def test_regression_fails_inconclusive_skips_non_gated_passes_with_note(regression_run):
    suite = _suite(regression_run)
    _counts_match(suite)
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"gsm8k_tiny", "boolq_tiny", f"{ODD_TASK} (not gated)"}
    failure = cases["gsm8k_tiny"].find("failure")
    assert failure.get("type") == "REGRESSION" and "dropped -18.3 pts" in failure.get("message")
    skipped = cases["boolq_tiny"].find("skipped")
    assert skipped.get("message").startswith("INCONCLUSIVE: no significant drop")
    odd = cases[f"{ODD_TASK} (not gated)"]
    assert odd.find("failure") is None and odd.find("skipped") is None
    assert odd.find("system-out").text.startswith("not gated (reported only): verdict PASS")
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["verdict"] == "REGRESSION" and properties["exit_code"] == "1"


def test_passing_run_has_no_failures_or_skips(compare_run):
    suite = _suite(compare_run)
    _counts_match(suite)
    assert suite.get("tests") == "1" and suite.get("failures") == "0"
    assert suite.get("skipped") == "0"


def test_non_gated_regression_cannot_fail_the_suite(regression_run):
    summary = read_summary(regression_run)
    for task in summary["tasks"]:
        task["gated"] = False
        task["verdict"] = "REGRESSION"
    root = ET.fromstring(render_junit(RunRecord.model_validate(summary)).encode())
    assert root.get("failures") == "0" and root.get("tests") == "3"


@pytest.mark.parametrize("run", ["regression_run", "compare_run"])
def test_validates_against_the_jenkins_junit_schema(run, request):
    etree = pytest.importorskip("lxml.etree", reason="XSD validation needs lxml")
    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    document = etree.parse(str(request.getfixturevalue(run) / "junit.xml"))
    assert schema.validate(document), schema.error_log
