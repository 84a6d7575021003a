"""The launcher's turn-taking (evals.runner.launch.run_arms_in_turn): the next arm's worker
imports while the arm before it runs, yet no two arms build or hold an engine at once, and
no import overlaps an arm's measured tasks; a failure or a stop after an arm ends the
started workers before they build anything.

The workers here are tests/unit/turn_taking_worker.py, which speaks the worker's protocol
without a model; tests/engine/test_ab_end_to_end.py checks the same order on real engines.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from evals.errors import RunFailed, UserError
from evals.plan.arm_spec import ArmSpec
from evals.dispatch.config_audit import AuditWhileStarting, ResolvedInWorkers
from evals.dispatch.arms import run_arms
from evals.runner import launch
from evals.runner.layout import ArmLayout

STAND_IN = Path(__file__).with_name("turn_taking_worker.py")


@pytest.fixture(autouse=True)
def stand_in_worker(monkeypatch):
    monkeypatch.setattr(launch, "WORKER", [str(STAND_IN)])


def specs(tmp_path: Path, names, **env_by_arm) -> dict[str, ArmSpec]:
    return {name: ArmSpec(arm=name, model="m", engine={}, tasks=("t",), limit=None,
                          num_fewshot=None, seed=1, include_paths=(), versions={},
                          output_dir=str(tmp_path / "arms" / name),
                          env={"TURN_LOG": str(tmp_path / "turns.jsonl"),
                               **env_by_arm.get(name, {})})
            for name in names}


def steps(tmp_path: Path) -> dict[tuple[str, str], float]:
    lines = (tmp_path / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    return {(row["arm"], row["step"]): row["t"] for row in map(json.loads, lines)}


def test_each_next_arm_imports_early_but_engines_and_imports_never_overlap_a_run(tmp_path):
    echoed = []
    layouts = launch.run_arms_in_turn(specs(tmp_path, "abc"), echo=echoed.append)
    assert list(layouts) == ["a", "b", "c"]
    t = steps(tmp_path)
    # b started before a finished, c before b finished: their imports left the critical path
    assert t["b", "started"] < t["a", "finished"]
    assert t["c", "started"] < t["b", "finished"]
    # one engine at a time: each engine turn comes after the arm before it ended
    assert t["a", "finished"] < t["b", "engine_turn"]
    assert t["b", "finished"] < t["c", "engine_turn"]
    # no import during a measured run: an arm goes only once the next arm is imported
    assert t["b", "imported"] <= t["a", "go"]
    assert t["c", "imported"] <= t["b", "go"]
    assert ["[evals] a: task 1/1 done", "[evals] b: task 1/1 done",
            "[evals] c: task 1/1 done"] == echoed


def test_a_failed_arm_stops_the_early_started_one_before_its_engine(tmp_path):
    with pytest.raises(RunFailed, match="(?s)arm `a` failed: its worker .* exited with code 1"
                                        ".*engine failed"):
        launch.run_arms_in_turn(specs(tmp_path, "ab", a={"TURN_FAIL": "engine"}))
    t = steps(tmp_path)
    assert ("b", "imported") in t and ("b", "engine_turn") not in t


def test_bad_input_of_the_first_arm_is_a_user_error_and_nothing_else_runs(tmp_path):
    with pytest.raises(UserError, match="no task named 'nope'"):
        launch.run_arms_in_turn(specs(tmp_path, "ab", a={"TURN_FAIL": "import"}))
    assert ("b", "engine_turn") not in steps(tmp_path)


def test_a_stop_after_the_first_arm_reaches_no_further_engine(tmp_path):
    def after_arm(name):
        if name == "a":
            raise UserError("config audit: stop")

    with pytest.raises(UserError, match="config audit: stop"):
        launch.run_arms_in_turn(specs(tmp_path, "ab"), after_arm=after_arm)
    t = steps(tmp_path)
    assert ("a", "finished") in t and ("b", "engine_turn") not in t


def test_the_go_answerer_still_decides_and_finished_arms_are_reused(tmp_path):
    arms = specs(tmp_path, "abc")
    ArmLayout(Path(arms["a"].output_dir)).mark_task_done("t", {"key": arms["a"].key_for("t")})
    questions, ended = [], []

    def stop(question):
        questions.append(question["kind"])
        return {"go": False}

    echoed = []
    launch.run_arms_in_turn(arms, echo=echoed.append, answers={"b": stop},
                            after_arm=ended.append)
    t = steps(tmp_path)
    # b was asked whether to resolve (no), then whether to go (no); its end was told
    assert ended == ["a", "b", "c"] and questions == ["resolve", "go", "ended"]
    assert echoed[0].startswith("[evals] a: reusing finished results")
    assert ("a", "started") not in t  # a finished arm starts no worker
    assert ("b", "stopped") in t and ("c", "finished") in t


def test_an_audit_waiting_for_a_workers_config_after_a_reused_first_arm(tmp_path):
    """The first arm is reused; the audit waits for the second's worker to resolve both
    configs, and gates that worker's go - it must not be joined before that worker runs."""
    arms = specs(tmp_path, "ab")
    ArmLayout(Path(arms["a"].output_dir)).mark_task_done("t", {"key": arms["a"].key_for("t")})
    board = ResolvedInWorkers(arms, audited=("a", "b"))
    assert board.hosts == {"b": ["b", "a"]}
    audit = AuditWhileStarting(board.collect)
    done = []
    runner = threading.Thread(target=lambda: done.append(run_arms(
        SimpleNamespace(source="c.yaml"), arms, print, audit=audit, in_workers=board)),
        daemon=True)
    runner.start()
    runner.join(60)
    assert done, "the run did not finish: the audit waited for a worker it held back"
    assert set(audit.join()) == {"a", "b"}
    t = steps(tmp_path)
    assert t["b", "resolved"] <= t["b", "go"] and ("a", "started") not in t
