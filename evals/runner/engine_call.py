"""The vLLM call an arm makes, assembled once: the run (evals.runner.backends) and the config
audit (evals.runner.config_resolver) both take it from here, so the audit resolves exactly
the engine the run starts - LoRA settings included.

Pure: no vLLM or lm-eval import.
"""

from __future__ import annotations

LORA_NAME = "evals-adapter"
"""The adapter's name in a server arm's requests (`--lora-modules NAME=PATH`)."""

# lm-eval's `vllm` backend turns `lora_local_path` into these vLLM engine arguments
# (lm_eval/models/vllm_causallms.py, VLLM.__init__: enable_lora, max_lora_rank default 16)
LM_EVAL_MAX_LORA_RANK = 16


def offline_call(spec) -> dict:
    """Keyword arguments of lm-eval's `VLLM(pretrained=..., seed=..., batch_size="auto", ...)`
    for an offline arm, beside those three."""
    kwargs = dict(spec.engine)
    kwargs.setdefault("disable_log_stats", False)  # the suite reads vLLM's counters
    if spec.lora_adapter:  # lm-eval turns this into enable_lora and a LoRARequest
        kwargs["lora_local_path"] = spec.lora_adapter
    return kwargs


def offline_engine_args(spec) -> dict:
    """The engine arguments (beside the model) that lm-eval hands vLLM's `LLM` for this arm's
    offline call: what the config audit resolves."""
    kwargs = offline_call(spec)
    adapter = kwargs.pop("lora_local_path", None)
    rank = kwargs.pop("max_lora_rank", LM_EVAL_MAX_LORA_RANK)
    kwargs.update(enable_lora=bool(adapter), max_lora_rank=int(rank))
    if spec.seed is not None:
        kwargs.setdefault("seed", spec.seed)  # lm-eval passes the run's seed to vLLM
    return kwargs


def server_call(spec) -> tuple[dict, str | None]:
    """The engine flags of a server arm's `vllm serve` (beside model, port and seed), and the
    model name its requests use when that is not the served name (an adapter)."""
    engine = dict(spec.engine)
    if not spec.lora_adapter:
        return engine, None
    engine.update(enable_lora=True, lora_modules=f"{LORA_NAME}={spec.lora_adapter}")
    return engine, LORA_NAME
