"""The canary command without an engine: which faults apply, bad input, the smallest
detectable rate (against an independent enumeration of the exact McNemar test), and the
table and page built from a canary.json."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from reference_power import exact_mcnemar_power

from evals.plan.canary import default_faults, faulty_config, parse_fault_args
from evals.record.canary_record import CanaryRecord, min_detectable_rate
from evals.plan.config import load_config
from evals.errors import UserError
from evals.record.run_record_model import TaskRecord
from evals.report.canary import build_canary_page, render_canary, render_canary_table

REPO = Path(__file__).resolve().parents[2]


def test_default_faults_follow_what_the_candidate_enables():
    mtp = load_config(REPO / "configs" / "cpu" / "mtp_prefix.yaml")
    names = [(f["name"], f.get("only_with_spec_decode", False)) for f in default_faults(mtp)]
    assert names == [("prefix_hit_overrun", True), ("prefix_key_collision", False),
                     ("spec_unverified", False), ("benign_tie_noise", False)]
    kv = load_config(REPO / "configs" / "cpu" / "kv_fp8.yaml")
    assert [f["name"] for f in default_faults(kv)] == ["kv_scale", "benign_tie_noise"]


def test_faulty_config_injects_into_the_candidate_only():
    config = load_config(REPO / "configs" / "cpu" / "kv_fp8.yaml")
    faulty = faulty_config(config, {"name": "kv_scale", "rate": 0.1})
    assert faulty.arms.baseline == config.arms.baseline
    assert [f.name for f in faulty.arms.candidate.faults] == ["kv_scale"]
    assert faulty.name == "cpu-kv-fp8-canary-kv_scale"


@pytest.mark.parametrize("args, message", [
    (["bit_flip"], "unknown fault 'bit_flip'"),
    (["kv_scale=lots"], "must be a number"),
])
def test_bad_fault_arguments(args, message):
    with pytest.raises(UserError, match=message):
        parse_fault_args(args)


@pytest.mark.parametrize("fault, message", [
    ({"name": "kv_scale", "rate": 0.0}, "greater than 0"),
    ({"name": "kv_scale", "rate": 2.0}, "less than or equal to 1"),
    ({"name": "spec_unverified"}, "no speculative_config"),
])
def test_a_fault_that_cannot_apply_is_bad_input(fault, message):
    config = load_config(REPO / "configs" / "cpu" / "kv_fp8.yaml")
    with pytest.raises(UserError, match=message):
        faulty_config(config, fault)


def test_canary_cli_rejects_bad_faults_before_any_engine(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "evals", "canary", "configs/cpu/kv_fp8.yaml",
                           "--faults", "spec_unverified", "--reports", str(tmp_path / "r")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "spec_unverified" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


def _summary(tasks):
    return [TaskRecord(task=name, verdict="PASS", gated=True, n=n, correct_to_wrong=b,
                       wrong_to_correct=c) for name, n, b, c in tasks]


def test_min_detectable_rate_matches_an_exact_enumeration():
    clean = _summary([("a", 300, 4, 3), ("b", 300, 2, 2)])
    faulty = _summary([("a", 300, 40, 5), ("b", 300, 3, 2)])  # at rate 0.5
    alpha = 0.05
    rate = min_detectable_rate(clean, faulty, 0.5, alpha)
    assert rate is not None and 0 < rate < 0.5

    def power(r):  # task a decides; level split over the two gated tasks
        scale = r / 0.5
        pb = 4 / 300 + scale * (40 - 4) / 300
        pc = 3 / 300 + scale * (5 - 3) / 300
        return exact_mcnemar_power(300, pb, pc, alpha / 2)

    assert power(rate) >= 0.8 - 1e-6
    assert power(rate - 0.005) < 0.8


def test_min_detectable_rate_none_when_the_fault_does_not_hurt():
    clean = _summary([("a", 300, 4, 3)])
    assert min_detectable_rate(clean, _summary([("a", 300, 4, 4)]), 1.0, 0.05) is None


def _canary_data() -> dict:
    fault = {"fault": "prefix_hit_overrun", "rate": 0.25, "harmful": True,
             "options": {"only_with_spec_decode": True}, "verdict": "REGRESSION",
             "exit_code": 1, "caught": True, "as_expected": True, "correct_to_wrong": 30,
             "wrong_to_correct": 2, "items_used": 400, "items_planned": 400, "fired": 57,
             "min_detectable_rate": 0.061, "run_id": "r-fault",
             "models": "vLLM #43559 <script>alert(1)</script>"}
    benign = dict(fault, fault="benign_tie_noise", harmful=False, options={}, verdict="PASS",
                  exit_code=0, caught=False, min_detectable_rate=None, run_id="r-benign")
    return {"schema_version": 1, "config": "c.yaml", "name": "n",
            "clean": {"run_id": "r-clean", "verdict": "PASS", "exit_code": 0,
                      "wall_seconds": 100.0},
            "faults": [fault, benign], "exercise": None, "wall_seconds": 300.0,
            "target_power": 0.8, "passed": True}


def test_table_and_page_from_canary_json():
    data = _canary_data()
    table = render_canary_table(CanaryRecord.model_validate(data))
    assert re.search(r"prefix_hit_overrun \(only with spec decode\)\s+0\.25\s+yes\s+REGRESSION",
                     table)
    assert "benign_tie_noise" in table and "> 1 (not within reach)" in table
    assert "canary PASSED" in table
    html = render_canary(build_canary_page(CanaryRecord.model_validate(data)))
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert 'href="../r-fault/report.html"' in html and "0.061" in html


def test_min_detectable_rate_when_the_line_leaves_the_simplex():
    # at rate 0.1 a quarter of the items flip: extrapolated to rate 1 that is more than all
    clean = _summary([("a", 200, 0, 0)])
    faulty = _summary([("a", 200, 52, 0)])
    rate = min_detectable_rate(clean, faulty, 0.1, 0.05)
    assert rate is not None and rate < 0.1
    pb = 52 / 200 * rate / 0.1
    assert exact_mcnemar_power(200, pb, 0.0, 0.05) >= 0.8 - 1e-6


def test_page_shows_the_clean_runs_exercise_record():
    # canary.json carries the clean A/B's exercise record as a plain mapping (not a run's
    # record): the page renders its section from it
    data = _canary_data()
    data["exercise"] = {"declared": ["prefix caching"], "kv_cache_dtype": {"candidate": "auto"},
                        "not_exercised": [], "tasks": [
                            {"arm": "candidate", "task": "tiny_reviews_shared_prefix",
                             "gated": True, "queried_tokens": 1000.0, "cached_tokens": 823.0,
                             "drafted_tokens": 0.0, "accepted_tokens": 0.0,
                             "preemptions": 0.0, "cached_share": 0.823, "acceptance": None}]}
    html = render_canary(build_canary_page(CanaryRecord.model_validate(data)))
    assert "tiny_reviews_shared_prefix" in html and "82.3%" in html
    assert "prefix caching" in html
