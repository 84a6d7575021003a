"""A stand-in for evals.runner.worker that builds no model: it speaks the worker's side of
the launcher's protocol (evals.runner.asks) and logs each step with its time, so
tests/unit/test_turn_taking.py can check the order the launcher imposes. The real worker's
order is checked on real engines by tests/engine/test_ab_end_to_end.py.

`python turn_taking_worker.py SPEC.json`; the spec's env says where to log
(TURN_LOG) and where to fail (TURN_FAIL: "import" or "engine").
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from evals.plan.arm_spec import ArmSpec
from evals.runner.asks import ask
from evals.runner.layout import ArmLayout

REPORT = {"effective": {"cache.block_size": 16}, "error": None, "engine_arg_names": [],
          "vllm_warnings": [], "seconds": 0.1, "resolve_seconds": 0.1, "peak_rss_mb": 1.0}


def log(arm: str, step: str) -> None:
    with open(os.environ["TURN_LOG"], "a", encoding="utf-8") as out:
        out.write(json.dumps({"arm": arm, "step": step, "t": time.time()}) + "\n")


def main(spec_path: str) -> int:
    spec = ArmSpec.read(spec_path)
    arm = spec.arm
    fail = os.environ.get("TURN_FAIL")
    log(arm, "started")
    time.sleep(0.6)  # importing vLLM and lm-eval
    if fail == "import":
        print("[evals-bad-input] lm-eval knows no task named 'nope'", flush=True)
        return 2
    log(arm, "imported")
    wanted = ask({"kind": "resolve"})  # a config audit's question (ResolvedInWorkers)
    if wanted and wanted.get("arms"):
        log(arm, "resolved")
        ask({"kind": "resolved", "reports": [REPORT for _ in wanted["arms"]]})
    ask({"kind": "engine"}, timeout=None)
    log(arm, "engine_turn")
    time.sleep(0.3)  # building the engine
    if fail == "engine":
        print("engine failed", flush=True)
        return 1
    answer = ask({"kind": "go"})
    if answer is not None and not answer.get("go"):
        log(arm, "stopped")
        return 0
    log(arm, "go")
    time.sleep(0.4)  # the tasks
    layout = ArmLayout(Path(spec.output_dir))
    layout.write_manifest({"arm": arm})
    for task in spec.tasks:
        layout.mark_task_done(task, {"task": task, "key": spec.key_for(task)})
    print(f"[evals] {arm}: task 1/1 done", flush=True)
    log(arm, "finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
