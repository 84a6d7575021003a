"""The run record (evals.record.run_record_model.RunRecord): built once by the pipeline from
recorded real lm-eval outputs, written and read back unchanged, every output (HTML, markdown,
JUnit, the CI outputs, the terminal table) rendered from the one model; and a summary.json of
the previous schema version read through the migration."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evals.pipelines.compare import run_compare
from evals.errors import UserError
from evals.plan.config import GateConfig
from evals.schemas import SUMMARY
from evals.record.run_record import SUMMARY_FILE, read_paired_items, read_run_record
from evals.record.run_record_model import RunRecord
from evals.report import write_reports
from evals.report._html import render_html
from evals.report._junit import render_junit
from evals.report._markdown import render_markdown
from evals.report._outputs import HTML_FILE, JUNIT_FILE, MARKDOWN_FILE
from evals.report._page import build_page
from evals.report.ci_outputs import annotations, publish_run, verdict_line
from evals.report.terminal_table import render_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LM_EVAL_RUN = FIXTURES / "lm_eval_run"  # `lm_eval run --log_samples` of the shipped model
RECORDED_V1 = FIXTURES / "run_w4a16"  # a real A/B run's records, written at schema version 1


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> Path:
    """A compare run of the recorded lm-eval outputs against a copy of them."""
    root = tmp_path_factory.mktemp("record")
    copy = Path(shutil.copytree(LM_EVAL_RUN, root / "copy"))
    printed: list[str] = []
    _, run_dir = run_compare(LM_EVAL_RUN, copy, gate=GateConfig(), reports_dir=root / "reports",
                             echo=printed.append)
    return run_dir


def _stored_text(record: RunRecord) -> str:
    return json.dumps(record.model_dump(), indent=2, default=str) + "\n"


def test_the_record_is_written_as_it_is_read(compared):
    record = read_run_record(compared)
    assert record.schema_version == SUMMARY.version and record.kind == "compare"
    assert [t.task for t in record.tasks] == ["tiny_reviews_gen", "tiny_reviews_mc"]
    assert _stored_text(record) == (compared / SUMMARY_FILE).read_text(encoding="utf-8")
    assert read_run_record(compared / SUMMARY_FILE) == record


def test_every_output_renders_from_the_one_record(compared):
    record = read_run_record(compared)
    page = build_page(record, read_paired_items(compared), 200)
    assert render_html(page) == (compared / HTML_FILE).read_text(encoding="utf-8")
    assert render_markdown(page) == (compared / MARKDOWN_FILE).read_text(encoding="utf-8")
    assert render_junit(record) == (compared / JUNIT_FILE).read_text(encoding="utf-8")
    where = compared / SUMMARY_FILE
    assert verdict_line(record, where) == \
        f"{record.verdict} exit={record.exit_code} {record.run_id}: {record.reason}"
    printed: list[str] = []
    publish_run(compared, {"GITHUB_ACTIONS": "true"}, echo=printed.append, warn=printed.append)
    assert printed == annotations(record, where)
    assert len(printed) == 1 + sum(t.gated and t.verdict != "PASS" for t in record.tasks)
    table = render_table(record)
    assert f"VERDICT: {record.verdict} - {record.reason}" in table
    assert all(t.task in table for t in record.tasks)


def test_a_previous_version_summary_reads_through_the_migration(tmp_path):
    raw = json.loads((RECORDED_V1 / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert raw["schema_version"] == 1
    record = read_run_record(RECORDED_V1)
    assert record.schema_version == SUMMARY.version
    # nothing dropped, nothing added: the record writes back what the file held
    assert json.dumps(record.model_dump(), sort_keys=True) == \
        json.dumps({**raw, "schema_version": SUMMARY.version}, sort_keys=True)
    assert record.gate.margin == raw["gate"]["margin"]
    # a v1 reader took a task that did not say whether it is gated as gated
    del raw["tasks"][0]["gated"]
    run = Path(shutil.copytree(RECORDED_V1, tmp_path / "run"))
    (run / SUMMARY_FILE).write_text(json.dumps(raw), encoding="utf-8")
    migrated = read_run_record(run)
    assert migrated.tasks[0].gated is True
    assert all(path.exists() for path in write_reports(run).values())


@pytest.mark.parametrize("damage, field", [
    (lambda raw: raw["gate"].update(margin="wide"), "gate.margin"),
    (lambda raw: raw["tasks"][0].update(n="many"), "tasks.0.n"),
    (lambda raw: raw.update(speed=[1, 2]), "speed"),
    (lambda raw: raw.update(surprise=1), "surprise"),
])
def test_a_field_of_the_wrong_shape_is_refused_by_the_reader(tmp_path, damage, field):
    raw = json.loads((RECORDED_V1 / SUMMARY_FILE).read_text(encoding="utf-8"))
    damage(raw)
    (tmp_path / SUMMARY_FILE).write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(UserError, match=f"unexpected shape \\(`{field}`"):
        read_run_record(tmp_path)
