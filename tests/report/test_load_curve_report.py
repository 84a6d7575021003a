"""The load curve from raw sweeps to the record, summary.md and the report's chart: a
constructed sweep where the candidate is faster at low concurrency and slower above it, a
failed level with a hostile server error, and the record read back as it was written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from evals.analyse.load_curve import analyse_load_curve
from evals.record.load_curve_record import load_curve_record
from evals.record.run_record import read_run_record
from evals.schemas import SUMMARY
from evals.report import write_reports

LEVELS = [1, 2, 4, 8]
HOSTILE = "<script>alert(1)</script> | **bold** `x`"


def _requests(concurrency: int, e2e: float, tokens: int, n: int, rng) -> list[dict]:
    """A closed loop: `concurrency` requests at a time, each taking about `e2e` seconds."""
    out, t = [], 0.0
    for i in range(n):
        start = t + (i % concurrency) * 1e-3
        took = e2e * rng.uniform(0.9, 1.1)
        first = start + 0.05 * concurrency * rng.uniform(0.9, 1.1)
        chunks = list(np.linspace(first, start + took, tokens))
        out.append({"start": start, "first": first, "end": start + took, "chunks": chunks,
                    "prompt_tokens": 10, "output_tokens": tokens, "error": None})
        if i % concurrency == concurrency - 1:
            t = start + took
    return out


def fake_sweep(arm: str, e2e_by_level: dict[int, float], failed: int | None = None,
               seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    results = []
    for c in LEVELS:
        requests = _requests(c, e2e_by_level[c], 16, 12, rng)
        level = {"concurrency": c, "status": "ok", "error": None, "requests": requests,
                 "warmup_errors": 0, "counters": {"vllm:num_preemptions": 0.0},
                 "gauges": [{"t": 0.0, "running": c, "waiting": 0, "kv_cache_usage": 0.1 * c}]}
        if c == failed:
            requests[3] = {**requests[3], "error": f"HTTP 500: {HOSTILE}"}
            level.update(status="failed", error=f"HTTP 500: {HOSTILE}")
        results.append(level)
    return {"arm": arm, "levels": LEVELS, "requests_per_level": 12, "prompts": "task t",
            "output_tokens": 16, "warm_state": {"accuracy_requests": 40,
                                                "accuracy_seconds": 30.0},
            "results": results, "wall_seconds": 12.5}


def _curve(failed=None):
    # candidate: half the time at 1 and 2, equal-ish at 4, twice the time at 8
    base = fake_sweep("baseline", {1: 1.0, 2: 1.1, 4: 1.2, 8: 1.4}, seed=1)
    cand = fake_sweep("candidate", {1: 0.5, 2: 0.6, 4: 1.0, 8: 2.8}, failed=failed, seed=2)
    return analyse_load_curve({"baseline": base, "candidate": cand}, levels=LEVELS,
                              requests_per_level=12, slo_ttft_p95_ms=150.0,
                              slo_tpot_p95_ms=None, rng=np.random.default_rng(3),
                              confidence=0.9, n_resamples=300)


def test_the_analysis_finds_the_crossover_and_the_slo_level():
    curve = _curve()
    assert [s.concurrency for s in curve.speedups] == LEVELS
    assert curve.speedups[0].speedup > 1.5 and curve.speedups[-1].speedup < 0.7
    assert curve.crossover.kind == "crossed" and curve.crossover.between == (4, 8)
    # TTFT is about 50 ms x concurrency: 100 ms at 2, 200 ms at 4
    assert curve.arms["baseline"].slo.safe_concurrency == 2
    # the raw timestamps, recomputed by hand: level 8's output tokens per second
    base = fake_sweep("baseline", {1: 1.0, 2: 1.1, 4: 1.2, 8: 1.4}, seed=1)
    reqs = base["results"][3]["requests"]
    wall = max(r["end"] for r in reqs) - min(r["start"] for r in reqs)
    level = curve.arms["baseline"].levels[3].summary
    assert level.output_tokens_per_s == pytest.approx(16 * 12 / wall)


def test_a_failed_level_keeps_its_error_and_the_others_count():
    curve = _curve(failed=2)
    level = curve.arms["candidate"].levels[1]
    assert level.status == "failed" and level.failed_requests == 1
    assert level.summary.requests == 11
    assert curve.speedups[1] is None and curve.speedups[2] is not None
    assert any("candidate at concurrency 2" in n for n in curve.notes)


@pytest.fixture(scope="module")
def swept_run(regression_run, tmp_path_factory) -> Path:
    run = Path(shutil.copytree(regression_run, tmp_path_factory.mktemp("lc") / "run"))
    record = read_run_record(run).model_copy(update={"load_curve": load_curve_record(
        _curve(failed=2))})
    text = json.dumps(SUMMARY.stamp(record.model_dump()), indent=2, default=str) + "\n"
    (run / "summary.json").write_text(text, encoding="utf-8")
    write_reports(run)
    return run


def test_the_record_reads_back_as_written(swept_run):
    record = read_run_record(swept_run)
    assert record.load_curve is not None and record.load_curve.levels == LEVELS
    assert record.load_curve.crossover.kind == "not_measured" or \
        record.load_curve.crossover.between is not None
    assert record.load_curve.arms["candidate"].levels[1].error == f"HTTP 500: {HOSTILE}"
    again = json.loads((swept_run / "summary.json").read_text(encoding="utf-8"))
    assert again["load_curve"] == record.load_curve.model_dump()


def test_the_html_chart_and_table_escape_the_server_error(swept_run):
    html = (swept_run / "report.html").read_text(encoding="utf-8")
    assert 'id="load-curve"' in html and '<svg class="load-curve"' in html
    # two arms, two panels; the candidate's failed level 2 breaks its lines in two, and
    # its level 1 stands alone as a point
    assert html.count('class="curve"') == 4
    assert 'class="slo"' in html and "SLO 150 ms" in html
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert "crossover" in html


def test_summary_md_has_the_table(swept_run):
    md = (swept_run / "summary.md").read_text(encoding="utf-8")
    assert "Load curve:" in md and "| concurrency |" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and line[2:3].isdigit()]
    assert [r.split("|")[1].strip() for r in rows] == [str(c) for c in LEVELS]
    assert "\\| \\*\\*bold" in rows[1]  # the server's error cannot open a cell
    assert "Crossover:" in md and "SLO: highest concurrency meeting TTFT p95 at most 150 ms: baseline 2" in md
    assert "<script>" not in md
    assert "Cost: sweep wall time: baseline 12 s against 30 s" in md  # 12.5 s, 30.0 s


def test_a_run_without_a_sweep_shows_no_section(regression_run):
    html = (regression_run / "report.html").read_text(encoding="utf-8")
    assert 'id="load-curve"' not in html


def test_an_arm_without_a_sweep_is_named():
    base = fake_sweep("baseline", {1: 1.0, 2: 1.1, 4: 1.2, 8: 1.4}, seed=1)
    broken = {"arm": "candidate", "results": [], "error": "OSError: no tokenizer"}
    for candidate, words in ((None, "none was recorded in the arm's folder"),
                             (broken, "OSError: no tokenizer")):
        curve = analyse_load_curve({"baseline": base, "candidate": candidate}, levels=LEVELS,
                                   requests_per_level=12, slo_ttft_p95_ms=150.0,
                                   slo_tpot_p95_ms=None, rng=np.random.default_rng(3))
        assert curve.crossover is None and all(s is None for s in curve.speedups)
        assert any(n.startswith("candidate: no sweep") and words in n for n in curve.notes)
        assert load_curve_record(curve).crossover.kind == "not_measured"


def test_a_curve_slower_at_first_names_the_levels_where_the_candidate_is_faster():
    """FP8 KV cache on one H100 (session 27): slower from 1 to 32, faster at 64 only. The
    reading names the faster levels instead of claiming "faster above" the first one."""
    from evals.report._load_curve import crossover_text

    base = fake_sweep("baseline", {1: 1.0, 2: 1.0, 4: 1.0, 8: 1.0}, seed=1)
    cand = fake_sweep("candidate", {1: 1.5, 2: 0.6, 4: 1.5, 8: 0.6}, seed=2)
    curve = analyse_load_curve({"baseline": base, "candidate": cand}, levels=LEVELS,
                               requests_per_level=12, slo_ttft_p95_ms=150.0,
                               slo_tpot_p95_ms=None, rng=np.random.default_rng(3),
                               confidence=0.9, n_resamples=300)
    assert curve.crossover.kind == "crossed"  # faster at 2, slower at 4
    cand = fake_sweep("candidate", {1: 1.5, 2: 1.5, 4: 1.5, 8: 0.6}, seed=2)
    curve = analyse_load_curve({"baseline": base, "candidate": cand}, levels=LEVELS,
                               requests_per_level=12, slo_ttft_p95_ms=150.0,
                               slo_tpot_p95_ms=None, rng=np.random.default_rng(3),
                               confidence=0.9, n_resamples=300)
    assert curve.crossover.kind == "not_faster_at_start"
    text = crossover_text(load_curve_record(curve))
    assert text.endswith("it is faster at 8"), text
