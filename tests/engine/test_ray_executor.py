"""`--executor ray` on a local Ray: the arms run as Ray tasks, their outputs come back into
the ordinary run layout, a rerun resumes from them, and an unreachable cluster is bad input
before any engine starts."""

from __future__ import annotations

import json
import time

from engine_helpers import ENGINE, run_cli, write_config

PLAIN = {**ENGINE, "enable_prefix_caching": False}
ADDITION = [{"name": "tiny_addition", "metric": "exact_match"}]
TWO_TASKS = [{"name": "tiny_addition", "metric": "exact_match"},
             {"name": "tiny_reviews_gen", "metric": "exact_match"}]


def test_aa_on_a_local_ray_passes_and_a_rerun_resumes(tmp_path):
    """Sharded by task: four Ray tasks (2 arms x 2 tasks), each with its own engine, whose
    outputs land in the two arms' ordinary directories."""
    config = write_config(tmp_path, "aa-ray", {"engine": PLAIN}, {"engine": PLAIN},
                          tasks=TWO_TASKS, expect_identical_arms=True)
    reports, store = tmp_path / "reports", str(tmp_path / "store")  # both arms really run
    result = run_cli("ab", str(config), "--executor", "ray", "--ray-shard", "task",
                     "--reports", str(reports), "--store", store)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    for arm in ("baseline", "candidate"):
        for task in ("tiny_addition", "tiny_reviews_gen"):
            assert f"{arm}/{task}: submitted to Ray (num_cpus" in result.stdout
    assert "arms ran on Ray" in result.stdout and result.stdout.count("model ready") == 4
    (run_dir,) = [p.parent for p in reports.glob("*/summary.json")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["verdict"] == "PASS"
    assert {t["task"]: t["n"] for t in summary["tasks"]} == {"tiny_addition": 200,
                                                             "tiny_reviews_gen": 200}
    for arm in ("baseline", "candidate"):  # the ordinary layout, with this run's paths
        arm_dir = run_dir / "arms" / arm
        for task in ("tiny_addition", "tiny_reviews_gen"):
            assert (arm_dir / "tasks" / f"{task}.json").is_file()
            assert list((arm_dir / "lm_eval").rglob(f"samples_{task}_*.jsonl"))
        spec = json.loads((arm_dir / "spec.json").read_text())
        assert spec["output_dir"] == str(arm_dir) and len(spec["tasks"]) == 2
    started = time.time()
    again = run_cli("ab", str(config), "--executor", "ray", "--ray-shard", "task",
                    "--reports", str(reports), "--store", store)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("reusing finished results") == 2, again.stdout[-3000:]
    assert "model ready" not in again.stdout
    assert time.time() - started < 300


def test_an_unreachable_ray_cluster_is_bad_input_before_any_engine(tmp_path):
    config = write_config(tmp_path, "aa-ray", {"engine": PLAIN}, {"engine": PLAIN},
                          tasks=ADDITION, expect_identical_arms=True)
    result = run_cli("ab", str(config), "--executor", "ray", "--ray-address", "127.0.0.1:9",
                     "--reports", str(tmp_path / "reports"), timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the Ray cluster at '127.0.0.1:9' is unreachable" in result.stderr
    assert "Traceback" not in result.stderr and "starting" not in result.stdout
