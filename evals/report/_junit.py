"""junit.xml: one testcase per task, so CI systems show the gate like a test run.

A gated task's REGRESSION is a `<failure>`, INCONCLUSIVE a `<skipped>` with the
reason as its message, PASS a plain passing testcase. Tasks that are not gated
cannot fail the run, so they are passing testcases named "<task> (not gated)" whose
`<system-out>` states their own verdict. Written with ElementTree, which escapes
all text and attributes. The layout validates against the Jenkins xunit-plugin
JUnit schema (junit-10.xsd).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from evals.record.run_record_model import RunRecord, TaskRecord
from evals.report import _formatting as fmt
from evals.report._summary_rows import platform_line
from evals.text_hygiene import visible

SUITE_NAME = "vllm-regression-evals"


def _task_seconds(summary: RunRecord, task: str) -> float:
    total = 0.0
    for arm in summary.arms.values():
        tasks = arm.tasks or {}
        if task in tasks and fmt.finite(tasks[task].wall_seconds):
            total += float(tasks[task].wall_seconds)
    return total


def _details(t: TaskRecord) -> str:
    return (f"{t.metric or ''}: baseline {fmt.mean(t.baseline_mean)}, candidate "
            f"{fmt.mean(t.candidate_mean)}, delta {fmt.points(t.delta)} pts "
            f"{fmt.points_interval(t.ci_low, t.ci_high)}; "
            f"{fmt.count(t.correct_to_wrong)} correct->wrong, "
            f"{fmt.count(t.wrong_to_correct)} wrong->correct of {fmt.count(t.n)}; "
            f"adjusted p {fmt.pvalue(t.regression_pvalue_adjusted)}\n"
            f"{t.reason or ''}")


def render_junit(summary: RunRecord) -> str:
    gate, run_id = summary.gate, summary.run_id
    cases, failures, skipped, seconds = [], 0, 0, 0.0
    for t in summary.tasks:
        task, verdict, gated = t.task, t.verdict, t.gated
        took = _task_seconds(summary, task)
        seconds += took
        case = ET.Element("testcase", {"classname": f"{SUITE_NAME}.{run_id}",
                                       "name": task if gated else f"{task} (not gated)",
                                       "time": f"{took:.3f}"})
        if not gated:
            ET.SubElement(case, "system-out").text = (
                f"not gated (reported only): verdict {verdict}\n{_details(t)}")
        elif verdict == "PASS":
            ET.SubElement(case, "system-out").text = _details(t)
        elif verdict == "REGRESSION":
            failures += 1
            ET.SubElement(case, "failure", {"type": "REGRESSION",
                                            "message": t.reason or ""}).text = _details(t)
        else:
            skipped += 1
            ET.SubElement(case, "skipped", {"type": verdict or "INCONCLUSIVE",
                                            "message": f"{verdict}: {t.reason or ''}"})
            ET.SubElement(case, "system-out").text = _details(t)
        cases.append(case)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0"}
    root = ET.Element("testsuites", {"name": SUITE_NAME, **counts, "time": f"{seconds:.3f}"})
    suite = ET.SubElement(root, "testsuite", {
        "name": f"{SUITE_NAME}.{run_id}", **counts, "skipped": str(skipped),
        "time": f"{seconds:.3f}", "timestamp": summary.created})
    properties = ET.SubElement(suite, "properties")
    for name, value in (("verdict", summary.verdict), ("reason", summary.reason),
                        ("exit_code", summary.exit_code), ("kind", summary.kind),
                        ("alpha", gate.alpha), ("margin", gate.margin),
                        ("correction", gate.correction),
                        ("suite_version", summary.suite_version),
                        ("platform", platform_line(summary))):
        ET.SubElement(properties, "property", {"name": name, "value": str(value)})
    suite.extend(cases)
    for element in root.iter():  # XML 1.0 cannot hold most control characters
        element.text = visible(element.text) if element.text else element.text
        for key, value in element.attrib.items():
            element.attrib[key] = visible(value)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
