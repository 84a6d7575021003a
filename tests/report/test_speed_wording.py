"""Speed in words a release manager reads ("candidate 1.69x slower per output token (90%
interval 1.64-1.75x)"), one wording (evals.analyse.speed.describe_speedup) in the HTML
report, summary.md, the terminal table and a missed speed gate's reason."""

from __future__ import annotations

import json
import shutil

import pytest

from evals.analyse.speed import describe_requirement, describe_speedup
from evals.record.run_record import read_run_record
from evals.report import write_reports
from evals.report.terminal_table import render_table


@pytest.mark.parametrize("args, words", [
    ((1.3, 1.2, 1.4, 0.95), "candidate 1.30x faster per output token (95% interval 1.20-1.40x)"),
    # baseline time / candidate time 0.59: the candidate takes 1/0.59 = 1.69x as long
    ((0.59, 0.57, 0.61, 0.9), "candidate 1.69x slower per output token (90% interval 1.64-1.75x)"),
    ((1.1, 0.95, 1.3, 0.9),
     "candidate 1.10x faster per output token (90% interval 1.05x slower to 1.30x faster)"),
    ((0.8, 0.7, 1.1, None),
     "candidate 1.25x slower per output token (interval 1.43x slower to 1.10x faster)"),
    ((1.004, 0.99, 1.02, 0.9),
     "candidate as fast as the baseline per output token (90% interval 1.01x slower to 1.02x "
     "faster)"),
    ((2.0, None, None, None), "candidate 2.00x faster per output token"),
    ((float("nan"), None, None, None), "speed per output token not measured"),
    ((0.0, None, None, None), "speed per output token not measured"),
])
def test_speedup_in_words(args, words):
    assert describe_speedup(*args) == words


def test_requirement_in_words():
    assert [describe_requirement(x) for x in (1.2, 1, 0.9)] == [
        "at least 1.2x faster", "at least as fast", "at most 1.11x slower"]


def test_one_wording_in_html_markdown_and_terminal(regression_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(regression_run, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    arm = {"requests": 40, "ttft_p50": 0.01, "ttft_p95": 0.02, "tpot_p50": 0.002,
           "tpot_p95": 0.004, "output_tokens_per_s": 300.0, "requests_per_s": 10.0,
           "acceptance_rate": None}
    summary["speed"] = {"baseline": arm, "candidate": arm, "tpot_speedup": 0.59,
                        "ci_low": 0.57, "ci_high": 0.61, "confidence": 0.9,
                        "throughput_ratio": 0.62, "min_speedup": None, "gate": None,
                        "note": None}
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    write_reports(run_dir)
    words = "candidate 1.69x slower per output token (90% interval 1.64-1.75x)"
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert f"<strong>Speed:</strong> {words}." in html
    assert "<strong>Throughput:</strong> candidate 1.61x slower in output tokens per second of " \
           "task time." in html
    assert f"\nSpeed: {words}.\n" in (run_dir / "summary.md").read_text(encoding="utf-8")
    assert f"\nSPEED: {words}" in render_table(read_run_record(run_dir))
    assert "baseline / candidate" not in html and "\u00d7" not in html
