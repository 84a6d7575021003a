"""lm-eval's environment report (torch's `get_pretty_env_info`, which lm-eval adds to every
task's results) computed once per interpreter: the same text, without its subprocesses."""

from __future__ import annotations

import subprocess

import pytest

from evals.runner.lm_eval_env import cache_env_info

collect_env = pytest.importorskip("torch.utils.collect_env")


def test_the_cached_report_is_torchs_and_runs_no_process_again(monkeypatch):
    original = collect_env.get_pretty_env_info
    monkeypatch.setattr(collect_env, "get_pretty_env_info", original)  # restored afterwards
    fresh = original()  # torch's own answer, computed without the cache
    cache_env_info()
    started = []
    real_popen = subprocess.Popen

    def counting_popen(*args, **kwargs):
        started.append(args[0] if args else kwargs.get("args"))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", counting_popen)
    # lm-eval looks the function up at each call (lm_eval.loggers.utils.add_env_info)
    from torch.utils.collect_env import get_pretty_env_info

    assert get_pretty_env_info() == fresh
    cache_env_info()  # a second call (a forked worker's) keeps the one cache
    assert collect_env.get_pretty_env_info() == fresh
    assert started == []
    # without the cache, torch starts its processes (pip list among them) at every call
    assert original() == fresh and any("pip" in " ".join(map(str, cmd)) for cmd in started)
