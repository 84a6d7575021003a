"""vLLM's inspection of a model class, forked instead of a fresh interpreter.

vLLM inspects a model class it has not met before in a fresh interpreter (`python -m
vllm.model_executor.models.registry`), which imports vLLM again: about 10 CPU-seconds on a
2-core machine, once per model class and machine (vLLM caches the answer on disk, keyed by
the model file's hash). A process forked from a fork server (evals.runner.fork_server) has
vLLM imported already; `inspect_in_forks()` has its inspections run by a sibling, forked
by the same server, which runs vLLM's own child code (evals.runner.vllm_compat) on the same
pickled request. Elsewhere, and when the server is gone, vLLM's way is kept: a fresh
interpreter.

`python -m evals.runner.model_inspection REQUEST` is that child: REQUEST is the file holding
what vLLM's child reads on its stdin.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

from evals.runner import fork_server, vllm_compat

MODULE = "evals.runner.model_inspection"


def _run(request: str) -> tuple[int, str]:
    argv = ["-m", MODULE, request]
    try:
        child = fork_server.fork_sibling(argv, os.getcwd())
    except fork_server.ForkServerUnavailable:
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                              errors="replace")
        return done.returncode, done.stderr + done.stdout
    output, _ = child.communicate()
    return child.returncode, output


def inspect_in_forks() -> bool:
    """In a process forked by a fork server: vLLM's model-class inspections are forked too
    (True). Elsewhere nothing changes (False)."""
    if fork_server.FORKED_ENV not in os.environ:
        return False
    return vllm_compat.route_model_inspection(_run)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: python -m {MODULE} REQUEST", file=sys.stderr)
        return 2
    with open(argv[0], "rb") as request:
        sys.stdin = io.TextIOWrapper(request)
        vllm_compat.run_model_inspection()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
