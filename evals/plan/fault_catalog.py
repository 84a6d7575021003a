"""The fault catalog: what each canary fault models, when it applies, and how an arm asks for
one. Pure: no vLLM import (the patches live in evals.faults.vllm_plugin,
which checks each patch point when it registers on a release in
evals.runner.vllm_compat.SUPPORTED).

A fault is deterministic: whether it touches a request or token is decided by a hash of
that request's or token's content and the fault's name (`fault_fires`), so a rerun of the
same arm flips the same items.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

ENV_VAR = "EVALS_FAULTS"
"""The arm's faults as JSON, set only in that arm's worker environment."""


@dataclass(frozen=True, slots=True)
class FaultInfo:
    name: str
    harmful: bool
    needs: str | None
    """The optimization the fault lives in: prefix_caching, spec_decode, fp8_kv_cache, or
    None (applies to any vLLM arm)."""
    default_rate: float
    models: str
    """The real bug(s) the fault is modeled on."""


FAULTS: dict[str, FaultInfo] = {f.name: f for f in (
    FaultInfo("prefix_hit_overrun", True, "prefix_caching", 1.0,
              "vLLM #43559 (Qwen3.6-35B-A3B lost ~20% on a classification task only with "
              "prefix caching and MTP both on; root cause PR #43650, also #47861, #48375): on a "
              "prefix-cache hit the scheduler counts one block more as computed than was "
              "computed, so that block's KV is stale"),
    FaultInfo("prefix_key_collision", True, "prefix_caching", 1.0,
              "prefix-cache key collisions (GHSA-rm76-4mrf-v9r8, PR #12621: predictable hash() "
              "keys; #44701: LoRA name and cache_salt colliding): the first block after a "
              "request's cached prefix is matched to another prompt's block at that position"),
    FaultInfo("spec_unverified", True, "spec_decode", 0.1,
              "MTP output accepted without verification: GLM-5.2 GSM8K 95.7% -> 1.1% with MTP "
              "(vLLM #46834), DeepSeek-V3.2 GSM8K 0.0 (PR #47902): a share of draft tokens "
              "comes from a broken draft head (an unrelated token) and is kept although the "
              "target model rejects it"),
    FaultInfo("kv_scale", True, "fp8_kv_cache", 0.05,
              "FP8 KV-cache accuracy bugs (vLLM #38652): K/V written to the FP8 cache with a "
              "scale off by 4x, so what attention reads back is 4x too large"),
    FaultInfo("benign_tie_noise", False, None, 1.0,
              "engine nondeterminism (vLLM #43570, #40896): logits perturbed at the size of "
              "bf16 rounding, so only near-ties flip; harmless by design"),
)}


def fault_fires(name: str, content: bytes, rate: float) -> bool:
    """True for a `rate` share of contents, the same share on every run (a content hash)."""
    if rate >= 1.0:
        return True
    digest = hashlib.blake2b(name.encode() + b"\0" + content, digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2 ** 64 < rate


def _enabled(engine: dict, key: str) -> bool:
    return bool(engine.get(key))


def check_applies(fault: dict, engine: dict, mode: str) -> str | None:
    """Why `fault` cannot apply to an arm with these engine arguments, or None if it can.

    A prefix fault with `only_with_spec_decode` is an interaction fault: by definition it
    fires only where prefix caching and speculative decoding are both on, so it is accepted
    on any vLLM arm (and stays inert on the others)."""
    info = FAULTS[fault["name"]]
    if mode not in ("offline", "server"):
        return f"mode `{mode}` runs no vLLM engine of ours to inject it into"
    if info.needs == "prefix_caching" and not fault.get("only_with_spec_decode") \
            and engine.get("enable_prefix_caching") is False:
        return "the arm turns prefix caching off (enable_prefix_caching: false)"
    if info.needs == "spec_decode" and not _enabled(engine, "speculative_config"):
        return "the arm has no speculative_config"
    if info.needs == "fp8_kv_cache" and not str(engine.get("kv_cache_dtype", "")).startswith("fp8"):
        return "the arm has no FP8 KV cache (kv_cache_dtype: fp8...)"
    return None


def encode_env(faults: list[dict]) -> str:
    return json.dumps(faults, sort_keys=True)


def decode_env(text: str) -> list[dict]:
    faults = json.loads(text)
    if not isinstance(faults, list) or not all(
            isinstance(f, dict) and f.get("name") in FAULTS for f in faults):
        raise ValueError(f"{ENV_VAR} must be a JSON list of faults named one of "
                         f"{', '.join(FAULTS)}; got {text!r}")
    return faults
