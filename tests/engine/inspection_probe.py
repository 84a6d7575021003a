"""Run by test_model_inspection.py in a process forked by the engine tests' fork server:
vLLM's model-class inspection after evals.runner.model_inspection has routed it, on the
embedded model's class, checked against the same inspection done in this process. Prints
one JSON line."""

from __future__ import annotations

import json
import os
import sys

from evals.runner.model_inspection import inspect_in_forks


def main(architecture: str) -> None:
    routed = inspect_in_forks()
    from vllm.model_executor.models import registry

    where = registry._run_in_subprocess(lambda: {"pid": os.getpid(), "parent": os.getppid()})
    model = registry.ModelRegistry.models[architecture]
    inspected = registry._run_in_subprocess(
        lambda: registry._ModelInfo.from_model_cls(model.load_model_cls()))
    here = registry._ModelInfo.from_model_cls(model.load_model_cls())
    try:
        registry._run_in_subprocess(lambda: 1 / 0)
        failure = None
    except RuntimeError as exc:
        failure = str(exc)
    print(json.dumps({"routed": routed, "pid": os.getpid(),
                      "server": int(os.environ["EVALS_FORKED"]), "where": where,
                      "architecture": inspected.architecture,
                      "same_as_here": inspected == here, "failure": failure}))


if __name__ == "__main__":
    main(sys.argv[1])
