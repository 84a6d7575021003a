"""One-sided evidence (evals.report._one_sided): forward vs reverse flips and the A/A flips
beside them, in the view-model, report.html and summary.md."""

from __future__ import annotations

import pytest

from evals.record.run_record import read_summary
from evals.record.run_record_model import RunRecord
from evals.report._one_sided import FLIP_MARGIN, one_sided_section, reading


@pytest.mark.parametrize("forward, reverse, aa, expected", [
    (0, 0, None, "no flips"),
    (14, 0, None, "one-sided: 14 more forward than reverse flips"),  # the Qwen3.6 red: 14/32
    (3, 1, None, "both ways (within 2), as batch nondeterminism flips"),
    (2 + FLIP_MARGIN + 1, 2, 1, "one-sided: 3 more forward than reverse flips"),
    (5, 0, 6, "one-sided: 5 more forward than reverse flips, but no more than the A/A "
              "rerun's 6 flips"),
    (0, 4, None, "one-sided the other way: 4 more reverse flips"),
])
def test_reading_of_forward_reverse_and_aa_flips(forward, reverse, aa, expected):
    assert reading(forward, reverse, aa)[0] == expected


def test_the_margin_is_vllms_flip_margin():
    assert FLIP_MARGIN == 2
    assert reading(2, 0, None)[0].startswith("both ways")
    assert reading(3, 0, None)[0].startswith("one-sided")


def test_view_model_has_the_binary_tasks_with_their_flips(regression_run):
    summary = RunRecord.model_validate(read_summary(regression_run))
    section = one_sided_section(summary)
    rows = {r.task: r for r in section.rows}
    assert set(rows) == {"gsm8k_tiny", "boolq_tiny"}  # the continuous task has no flips
    gsm = rows["gsm8k_tiny"]
    assert (gsm.forward, gsm.reverse, gsm.aa_flips, gsm.css) == (12, 1, "not run", "worse")
    assert gsm.reading == "one-sided: 11 more forward than reverse flips"
    assert rows["boolq_tiny"].reading.startswith("both ways")
    assert not section.aa_run


def test_aa_flips_come_from_the_noise_floor(regression_run):
    summary = RunRecord.model_validate(read_summary(regression_run))
    tasks = [t.model_copy(update={"noise_flips": 13}) for t in summary.tasks]
    section = one_sided_section(summary.model_copy(update={"tasks": tasks}))
    gsm = next(r for r in section.rows if r.task == "gsm8k_tiny")
    assert section.aa_run and gsm.aa_flips == "13"
    assert gsm.reading == ("one-sided: 11 more forward than reverse flips, but no more than "
                           "the A/A rerun's 13 flips")


def test_report_and_summary_show_the_section(regression_run):
    html = (regression_run / "report.html").read_text(encoding="utf-8")
    assert '<section id="one-sided">' in html and 'href="#one-sided"' in html
    assert "one-sided: 11 more forward than reverse flips" in html
    assert "No A/A rerun in this run" in html
    markdown = (regression_run / "summary.md").read_text(encoding="utf-8")
    assert "| gsm8k\\_tiny | 60 | 12 | 1 | not run | one-sided: 11 more forward than reverse " \
           "flips |" in markdown
