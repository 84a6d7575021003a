"""A server arm whose accuracy items are reused from the run store (issue 55): the load sweep
recorded with them stands in when the config asks for it (`speed.on_reuse: recorded`) and
its settings are the same, and says so; otherwise the arm is not complete, so its worker
starts the server for the sweep alone (`rerun`). The report's cost line names which."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evals.analyse.load_curve import analyse_load_curve
from evals.dispatch.reuse import reuse_recorded_sweep
from evals.plan.arm_spec import ArmSpec
from evals.record.load_curve_record import load_curve_record
from evals.schemas import LOAD_SWEEP
from evals.report._load_curve import _cost_text
from evals.runner.launch import arm_is_complete
from evals.runner.layout import ArmLayout, sweep_path, sweep_settings

LEVELS = [1, 2]
SETTINGS = {"levels": LEVELS, "requests_per_level": 4, "prompts": "t", "output_tokens": 8,
            "request_timeout_s": 600, "level_timeout_s": 1800, "on_reuse": "recorded"}


def _spec(root: Path, **changes) -> ArmSpec:
    spec = ArmSpec(arm="candidate", model="m", engine={}, env={}, tasks=("t",), limit=4,
                   num_fewshot=0, seed=1, include_paths=(), output_dir=str(root / "new"),
                   versions={}, platform={}, mode="server", serving={"concurrency": 2},
                   load_sweep=dict(SETTINGS))
    return replace(spec, **changes)


def _sweep(settings: dict, *, error: str | None = None) -> dict:
    results = []
    for c in LEVELS:
        requests = [{"start": i * 0.5, "first": i * 0.5 + 0.05, "end": i * 0.5 + 0.4,
                     "chunks": list(np.linspace(i * 0.5 + 0.05, i * 0.5 + 0.4, 8)),
                     "prompt_tokens": 5, "output_tokens": 8, "error": None} for i in range(4)]
        results.append({"concurrency": c, "status": "ok", "error": None, "requests": requests,
                        "warmup_errors": 0, "gauges": [], "counters": {}})
    record = {"arm": "candidate", "levels": LEVELS, "requests_per_level": 4, "prompts": "task t",
              "output_tokens": 8, "origin": "ran", "settings": sweep_settings(settings),
              "warm_state": {"accuracy_requests": 4, "accuracy_seconds": 7.0,
                             "server_start_seconds": 20.0},
              "results": [] if error else results, "wall_seconds": 3.5}
    return {**record, "error": error} if error else record


def _reused_arm(tmp_path: Path, spec: ArmSpec, stored_sweep: dict | None) -> dict[str, dict]:
    """The stored arm (its sweep) and the new arm whose task was reused from it."""
    source = ArmLayout(tmp_path / "old")
    if stored_sweep is not None:
        LOAD_SWEEP.write(sweep_path(source.root), stored_sweep)
    record = {"task": "t", "key": spec.key_for("t"), "reused_from": str(source.root),
              "reused_run": "run-old"}
    ArmLayout(Path(spec.output_dir)).mark_task_done("t", record)
    return {"t": record}


def test_the_recorded_sweep_stands_in_and_says_where_it_came_from(tmp_path):
    spec = _spec(tmp_path)
    reused = _reused_arm(tmp_path, spec, _sweep(SETTINGS))
    assert not arm_is_complete(spec)  # its sweep is due
    copied = reuse_recorded_sweep(spec, reused)
    assert copied["origin"] == "reused" and copied["reused_run"] == "run-old"
    assert copied["recorded_in"] == str(tmp_path / "old")
    assert LOAD_SWEEP.read(sweep_path(spec.output_dir)) == copied
    assert arm_is_complete(spec)  # no worker starts


@pytest.mark.parametrize("change", [
    {"on_reuse": "rerun"},          # the config asks for a new sweep
    {"levels": [1, 2, 4]},          # the recorded sweep measured other levels
    {"requests_per_level": 8},
])
def test_otherwise_the_arm_sweeps_again(tmp_path, change):
    spec = _spec(tmp_path, load_sweep={**SETTINGS, **change})
    reused = _reused_arm(tmp_path, spec, _sweep(SETTINGS))
    assert reuse_recorded_sweep(spec, reused) is None
    assert not sweep_path(spec.output_dir).exists()
    assert not arm_is_complete(spec) and ArmLayout(Path(spec.output_dir)).sweep_due(spec)


def test_a_failed_or_missing_recorded_sweep_is_not_reused(tmp_path):
    spec = _spec(tmp_path)
    assert reuse_recorded_sweep(spec, _reused_arm(tmp_path, spec, None)) is None
    failed = _spec(tmp_path / "b")
    reused = _reused_arm(tmp_path / "b", failed, _sweep(SETTINGS, error="no prompts"))
    assert reuse_recorded_sweep(failed, reused) is None


def test_offline_arms_and_configs_without_speed_have_no_sweep_due(tmp_path):
    for spec in (_spec(tmp_path, mode="offline"), _spec(tmp_path, load_sweep=None)):
        _reused_arm(tmp_path, spec, None)
        assert reuse_recorded_sweep(spec, {}) is None and arm_is_complete(spec)


def _cost(sweeps: dict) -> str:
    curve = analyse_load_curve(sweeps, levels=LEVELS, requests_per_level=4,
                               slo_ttft_p95_ms=None, slo_tpot_p95_ms=None,
                               rng=np.random.default_rng(0), n_resamples=50)
    return _cost_text(load_curve_record(curve))


def test_the_cost_line_says_which_arm_ran_reused_or_reran_its_sweep():
    ran = _sweep(SETTINGS)
    reused = {**ran, "origin": "reused", "reused_run": "run-old"}
    rerun = {**ran, "origin": "rerun", "wall_seconds": 4.0,
             "warm_state": {"accuracy_requests": 0, "accuracy_seconds": None,
                            "server_start_seconds": 21.0}}
    text = _cost({"baseline": ran, "candidate": reused})
    assert text == ("sweep wall time: baseline 3.5 s against 7.0 s for its accuracy items on "
                    "the same server; candidate 0 s here: reused from run run-old, where it "
                    "took 3.5 s against 7.0 s for its accuracy items")
    text = _cost({"baseline": ran, "candidate": rerun})
    assert "candidate 4.0 s rerun alone on a fresh server (its start 21 s; its accuracy " \
           "items were reused" in text
    reused_rerun = {**rerun, "origin": "reused", "reused_run": "run-rerun"}
    assert _cost({"baseline": ran, "candidate": reused_rerun}).endswith(
        "candidate 0 s here: reused from run run-rerun, where it took 4.0 s alone on a fresh "
        "server")
    old = {k: v for k, v in ran.items() if k not in ("origin", "settings")}  # before origins
    assert _cost({"baseline": old, "candidate": ran}).startswith("sweep wall time: baseline "
                                                                   "3.5 s against 7.0 s")
