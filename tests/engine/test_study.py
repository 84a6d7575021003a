"""A study with an arm whose engine cannot start: that arm's comparison fails, the others
still get their verdicts, the run exits 4, and a rerun resumes (finished arms are reused)."""

from __future__ import annotations

import sqlite3

import yaml
from engine_helpers import CPU_ENV, ENGINE, LIMIT, MODEL, run_cli

from evals.schemas import STUDY

# the settings of conftest's shared `mtp_prefix_run`: these arms come from the session store
PLAIN = {**ENGINE, "enable_prefix_caching": False}
MTP_PREFIX = {**ENGINE, "enable_prefix_caching": True,
              "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}
ADDITION = {"name": "tiny_addition", "metric": "exact_match"}


def test_a_failed_arm_fails_only_its_comparison_and_a_rerun_resumes(tmp_path, mtp_prefix_run,
                                                                      shared_store):
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump({
        "name": "study-failing-arm", "model": str(MODEL), "tasks": [ADDITION], "limit": LIMIT,
        "num_fewshot": 0, "seed": 1234, "gate": {"alpha": 0.05, "margin": 0.05},
        "intended_change": ["enable_prefix_caching", "speculative_config", "env"],
        "arm_defaults": {"env": CPU_ENV},
        "arms": {"baseline": {"engine": PLAIN}, "mtp_prefix": {"engine": MTP_PREFIX},
                 # far too little KV cache for one sequence: the engine refuses to start
                 "starved": {"engine": MTP_PREFIX,
                             "env": {"VLLM_CPU_KVCACHE_SPACE": "0.0001"}}}},
        sort_keys=False))
    reports = tmp_path / "reports"
    result = run_cli("ab", str(config), "--reports", str(reports))
    assert result.returncode == 4, result.stdout[-4000:] + result.stderr[-4000:]
    assert "Traceback" not in result.stderr
    assert "arm starved failed; its comparisons fail, the other arms go on" in result.stdout
    (study_path,) = reports.glob("*/study.json")
    study = STUDY.read(study_path)
    verdicts = {c["arm"]: c["verdict"] for c in study["comparisons"]}
    assert verdicts["starved"] == "FAILED"
    assert verdicts["mtp_prefix"] in ("PASS", "INCONCLUSIVE", "REGRESSION")  # it was judged
    assert list(study["failed"]) == ["starved"] and study["exit_code"] == 4
    assert (study_path.parent / "comparisons" / "mtp_prefix" / "report.html").is_file()
    # the run store indexes the study's arm tasks under directories that exist (the arms'
    # own, under <study>/arms/), so a later run or study reuses them
    with sqlite3.connect(shared_store / "index.sqlite") as conn:
        paths = {row[0] for row in conn.execute(
            "SELECT path FROM task_results WHERE run_id LIKE ?", (study["run_id"] + ".%",))}
    assert paths == {str(study_path.parent / "arms" / "baseline"),
                     str(study_path.parent / "arms" / "mtp_prefix")}, paths
    again = run_cli("ab", str(config), "--reports", str(reports))
    assert again.returncode == 4, again.stdout[-3000:] + again.stderr[-3000:]
    assert "baseline: reusing finished results" in again.stdout
    assert "mtp_prefix: reusing finished results" in again.stdout
