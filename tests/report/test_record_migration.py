"""Records written by earlier versions of the suite still read and render through the one
reader's migration (evals.record.run_record.read_run_record, evals.schemas.SUMMARY).

tests/fixtures/run_v2_regression is the regression run of tests/report/fake_runs.py written
by the pipeline at commit ffc92e9 (summary schema version 2, before the record's parts were
typed); benchmarks/results holds real runs' summaries of versions 1 and 2, and studies'
and a canary's records of version 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evals.record.canary_record import read_canary_record
from evals.record.run_record import SUMMARY_FILE, read_paired_items, read_run_record
from evals.record.study_record import read_study_record
from evals.report import write_reports
from evals.report._html import render_html
from evals.report._junit import render_junit
from evals.report._markdown import render_markdown
from evals.report._page import build_page
from evals.report.canary import build_canary_page, render_canary, render_canary_table
from evals.report.study import build_study_page, render_study, render_study_markdown
from evals.report.terminal_table import render_table
from evals.schemas import CANARY, STUDY, SUMMARY

REPO = Path(__file__).resolve().parents[2]
WRITTEN_V2 = REPO / "tests" / "fixtures" / "run_v2_regression"
BENCHMARK_SUMMARIES = sorted((REPO / "benchmarks" / "results").rglob(SUMMARY_FILE))


def _markdown_text(text: str) -> str:
    return text.replace("_", "\\_")


def test_a_version_2_record_reads_and_renders_through_the_migration(tmp_path):
    raw = json.loads((WRITTEN_V2 / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert raw["schema_version"] == 2
    record = read_run_record(WRITTEN_V2)
    assert record.schema_version == SUMMARY.version > 2
    # nothing dropped, nothing added: the typed parts hold what the file held
    assert json.dumps(record.model_dump(), sort_keys=True) == \
        json.dumps({**raw, "schema_version": SUMMARY.version}, sort_keys=True)
    assert record.tasks[1].labels.categories == raw["tasks"][1]["labels"]["categories"]
    assert record.pooled.correct_to_wrong == raw["pooled"]["correct_to_wrong"]
    assert record.platform.summary == raw["platform"]["summary"]
    assert (record.verdict, record.exit_code) == (raw["verdict"], raw["exit_code"])
    assert [t.task for t in record.tasks] == [t["task"] for t in raw["tasks"]]
    page = build_page(record, read_paired_items(WRITTEN_V2), 200)
    html, markdown = render_html(page), render_markdown(page)
    for task in ("gsm8k_tiny", "boolq_tiny"):
        assert task in html and _markdown_text(task) in markdown
    assert raw["verdict"] in html and raw["verdict"] in markdown
    assert _markdown_text(raw["reason"]) in markdown
    run = Path(shutil.copytree(WRITTEN_V2, tmp_path / "run"))
    written = write_reports(run)
    assert all(path.exists() and path.stat().st_size for path in written.values())


@pytest.mark.parametrize("path", BENCHMARK_SUMMARIES,
                         ids=[str(p.parent.relative_to(REPO)) for p in BENCHMARK_SUMMARIES])
def test_every_committed_real_run_reads_and_renders(path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    record = read_run_record(path)
    assert record.schema_version == SUMMARY.version
    assert record.verdict == raw["verdict"] and len(record.tasks) == len(raw["tasks"])
    page = build_page(record, read_paired_items(path.parent), 200)
    html, markdown = render_html(page), render_markdown(page)
    assert all(_markdown_text(t["task"]) in markdown for t in raw["tasks"])
    assert raw["run_id"] in html
    table = render_table(record)  # the terminal table and JUnit read the same parts
    assert f"VERDICT: {raw['verdict']}" in table and all(t["task"] in table for t in raw["tasks"])
    if raw.get("exercise", {}).get("tasks"):
        assert "EXERCISED" in table
    assert all(t["task"] in render_junit(record) for t in raw["tasks"])


STUDIES = sorted((REPO / "benchmarks" / "results").rglob("study.json"))
CANARIES = sorted((REPO / "benchmarks" / "results").rglob("canary.json"))


def test_the_committed_studies_include_version_1_ones_for_the_migration():
    versions = [json.loads(p.read_text(encoding="utf-8"))["schema_version"] for p in STUDIES]
    assert versions.count(1) >= 4 and 1 < STUDY.version


@pytest.mark.parametrize("path", STUDIES, ids=[p.parent.name for p in STUDIES])
def test_a_committed_study_reads_and_renders_at_the_current_version(path):
    """Version-1 studies through the migration, current ones as written."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["schema_version"] in (1, STUDY.version)
    record = read_study_record(path)
    assert record.schema_version == STUDY.version
    assert json.dumps(record.model_dump(), sort_keys=True) == \
        json.dumps({**raw, "schema_version": STUDY.version}, sort_keys=True)
    page = build_study_page(record)
    html, markdown = render_study(page), render_study_markdown(page)
    assert all(c["arm"] in html and c["verdict"] in markdown for c in raw["comparisons"])
    assert [i.sentence for i in record.interactions] == [i["sentence"]
                                                         for i in raw["interactions"]]


@pytest.mark.parametrize("path", CANARIES, ids=[p.parent.name for p in CANARIES])
def test_a_version_1_canary_reads_and_renders_through_the_migration(path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["schema_version"] == 1 < CANARY.version
    record = read_canary_record(path)
    assert record.schema_version == CANARY.version
    assert json.dumps(record.model_dump(), sort_keys=True) == \
        json.dumps({**raw, "schema_version": CANARY.version}, sort_keys=True)
    html = render_canary(build_canary_page(record))
    assert all(f["fault"] in html for f in raw["faults"])
    table = render_canary_table(record)
    assert all(f["fault"] in table for f in raw["faults"])


def test_every_key_of_the_committed_runs_arms_is_a_typed_field():
    """The arms part keeps a key a newer worker adds (evals.record.arm_record); every key
    the committed runs' workers wrote is a declared, described field."""
    for path in BENCHMARK_SUMMARIES + [WRITTEN_V2 / SUMMARY_FILE]:
        for name, arm in read_run_record(path).arms.items():
            assert not arm.model_extra, (path, name, sorted(arm.model_extra))
            for task, record in (arm.tasks or {}).items():
                assert not record.model_extra, (path, name, task, sorted(record.model_extra))
