"""The config audit's configs resolved by the arms' own workers
(evals.dispatch.config_audit.ResolvedInWorkers): which worker resolves which arm, what the parent
answers, and that the audit waits for every host to report or end. The workers' side runs
on real engines in tests/engine (every `ab` audits this way; test_ab_end_to_end checks it)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from evals.plan.arm_spec import ArmSpec
from evals.dispatch.config_audit import ResolvedInWorkers
from evals.runner.asks import ENDED
from evals.runner.layout import ArmLayout

REPORT = {"effective": {"cache.block_size": 16}, "error": None, "engine_arg_names": ["seed"],
          "vllm_warnings": [], "seconds": 0.4, "resolve_seconds": 0.4, "peak_rss_mb": 1.0}


def arm(tmp_path: Path, name: str, **changes) -> ArmSpec:
    spec = ArmSpec(arm=name, model="m", engine={"seed": 1}, env={}, tasks=("t",), limit=None,
                   num_fewshot=None, seed=1, include_paths=(), versions={},
                   output_dir=str(tmp_path / name))
    return replace(spec, **changes)


def finished(spec: ArmSpec) -> ArmSpec:
    ArmLayout(Path(spec.output_dir)).mark_task_done("t", {"key": spec.key_for("t")})
    return spec


def test_each_running_offline_arm_resolves_itself(tmp_path):
    specs = {"baseline": arm(tmp_path, "baseline"), "candidate": arm(tmp_path, "candidate")}
    assert ResolvedInWorkers.plan(specs) == {"baseline": ["baseline"],
                                             "candidate": ["candidate"]}


def test_a_reused_arm_is_resolved_by_a_running_worker_with_its_environment(tmp_path):
    faults = ({"name": "spec_unverified", "rate": 1.0},)
    specs = {"baseline": finished(arm(tmp_path, "baseline")),
             "candidate": arm(tmp_path, "candidate", faults=faults)}
    # the canary's variables patch vLLM at run time, not its config: same environment
    assert ResolvedInWorkers.plan(specs) == {"candidate": ["candidate", "baseline"]}
    specs["baseline"] = finished(arm(tmp_path, "baseline", env={"VLLM_CPU_KVCACHE_SPACE": "3"}))
    assert ResolvedInWorkers.plan(specs) == {"candidate": ["candidate"]}


def test_server_and_finished_arms_host_nothing(tmp_path):
    specs = {"baseline": finished(arm(tmp_path, "baseline")),
             "candidate": arm(tmp_path, "candidate", mode="server")}
    assert ResolvedInWorkers.plan(specs) == {}
    specs["baseline"] = arm(tmp_path / "again", "baseline")  # not finished: it runs
    assert ResolvedInWorkers.plan(specs) == {"baseline": ["baseline", "candidate"]}


def test_the_audit_waits_for_every_host_and_passes_other_questions_on(tmp_path):
    specs = {"baseline": arm(tmp_path, "baseline"), "candidate": arm(tmp_path, "candidate")}
    board = ResolvedInWorkers(specs)
    passed = []
    answers = {name: board.answerer(name, lambda q: passed.append(q["kind"]) or {"go": True})
               for name in specs}
    asked = answers["baseline"]({"kind": "resolve"})
    # the engine arguments of the arm's vLLM call (evals.runner.engine_call), not its config's
    assert asked == {"arms": [{"model": "m", "engine": {"seed": 1, "disable_log_stats": False,
                                                        "enable_lora": False,
                                                        "max_lora_rank": 16},
                               "seed": 1, "mode": "offline"}]}
    collected = {}
    waiter = threading.Thread(target=lambda: collected.update(board.collect()))
    waiter.start()
    assert answers["baseline"]({"kind": "resolved", "reports": [REPORT]}) is None
    waiter.join(0.3)
    assert waiter.is_alive()  # the candidate has neither reported nor ended
    answers["candidate"]({"kind": ENDED})  # e.g. bad input: it never resolved
    waiter.join(5)
    assert not waiter.is_alive()
    assert set(collected) == {"baseline"}  # the candidate falls back to a resolver process
    assert collected["baseline"].effective == REPORT["effective"]
    assert collected["baseline"].resolved_in == "the arm's worker"
    assert answers["baseline"]({"kind": "go"}) == {"go": True} and passed == ["ended", "go"]
