"""lm-eval's environment report, computed once per interpreter.

lm-eval's `simple_evaluate` adds torch's `get_pretty_env_info()` to every task's results
(`pretty_env_info` in its results file): about fifteen subprocesses (`pip list`, the
compilers, the OS release), 0.7-0.9 s on a 2-core machine, for every task of every arm,
with the same answer each time in one interpreter and environment. `cache_env_info()` makes
torch's function answer from a cache: an arm's worker calls it before its first task, and a
fork server (evals.runner.fork_server) before it forks, so its workers inherit the answer it
computed under their environment (a server serves only the environment it started in).
"""

from __future__ import annotations

import functools


def cache_env_info() -> None:
    """Compute torch's environment report now, and answer later calls from it."""
    try:
        from torch.utils import collect_env
    except ImportError:  # lm-eval reports "torch not installed" without asking torch
        return
    if not hasattr(collect_env.get_pretty_env_info, "cache_info"):
        collect_env.get_pretty_env_info = functools.cache(collect_env.get_pretty_env_info)
    collect_env.get_pretty_env_info()
