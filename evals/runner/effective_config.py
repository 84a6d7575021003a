"""The engine configuration vLLM actually used, flattened to comparable plain values."""

from __future__ import annotations

import dataclasses
import enum

# sub-configs of VllmConfig that decide what an engine computes
_SECTIONS = ("model_config", "cache_config", "scheduler_config", "speculative_config",
             "parallel_config", "load_config", "compilation_config", "lora_config",
             "structured_outputs_config", "quant_config", "kv_transfer_config")
# values that differ between identical engines or that are not configuration
_VOLATILE = ("instance_id", "hf_config", "hf_text_config", "hf_image_processor_config",
             "encoder_config", "pooler_config", "multimodal_config", "logits_processors",
             "compile_sizes", "cudagraph_capture_sizes", "bs_to_padded_graph_size",
             "static_forward_context", "traced_files", "compilation_time", "num_gpu_blocks",
             "num_cpu_blocks", "local_cache_dir", "inductor_compile_config",
             "enabled_custom_ops", "disabled_custom_ops", "pass_config")


def _is_torch_dtype(value) -> bool:
    # torch is not imported here: the type is recognised by name
    return type(value).__module__ == "torch" and type(value).__name__ == "dtype"


def _plain(value):
    if isinstance(value, enum.Enum):
        return value.name
    if _is_torch_dtype(value):
        return str(value).removeprefix("torch.")  # model.dtype: "bfloat16"
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (str, int, float, bool)) or v is None for v in value):
        return list(value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value) and len(value) < 50:
        flat = {k: _plain(v) for k, v in value.items()}
        if all(v is not _SKIP for v in flat.values()):
            return flat
    return _SKIP


_SKIP = object()


def _flatten(prefix: str, obj, out: dict, depth: int = 0) -> None:
    if obj is None:
        out[prefix] = None
        return
    if dataclasses.is_dataclass(obj) or hasattr(obj, "__dict__"):
        names = ([f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj)
                 else list(vars(obj)))
        for name in names:
            if name.startswith("_") or name in _VOLATILE:
                continue
            value = getattr(obj, name, None)
            plain = _plain(value)
            if plain is not _SKIP:
                out[f"{prefix}.{name}"] = plain
            elif depth < 1 and value is not None and (
                    dataclasses.is_dataclass(value)):
                _flatten(f"{prefix}.{name}", value, out, depth + 1)


def flatten_vllm_config(config) -> dict:
    """Flat {section.field: value} of a VllmConfig (a running engine's or a resolved one)."""
    out: dict = {}
    for section in _SECTIONS:
        if hasattr(config, section):
            _flatten(section.removesuffix("_config"), getattr(config, section), out)
    return dict(sorted(out.items()))


def effective_engine_config(llm) -> dict:
    """Flat {section.field: value} of the running engine's VllmConfig."""
    return flatten_vllm_config(llm.llm_engine.vllm_config)
