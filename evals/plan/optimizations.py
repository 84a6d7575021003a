"""The optimizations a config declares: what the candidate's engine arguments turn on that
the baseline's do not. The canary picks its faults from them (evals.pipelines.canary) and
the exercise check asks whether each engaged (evals.analyse.exercise)."""

from __future__ import annotations

PREFIX_CACHING = "prefix caching"
SPEC_DECODE = "speculative decoding"
FP8_KV_CACHE = "FP8 KV cache"


def declared_optimizations(baseline: dict, candidate: dict) -> tuple[str, ...]:
    """From the two arms' engine arguments: what the candidate turns on that the baseline
    does not (an optimization both arms run is not what the comparison tests)."""
    found = []
    if candidate.get("enable_prefix_caching") is True and \
            baseline.get("enable_prefix_caching") is not True:
        found.append(PREFIX_CACHING)
    if candidate.get("speculative_config") and \
            candidate.get("speculative_config") != baseline.get("speculative_config"):
        found.append(SPEC_DECODE)
    dtype = str(candidate.get("kv_cache_dtype") or "")
    if dtype.startswith("fp8") and dtype != str(baseline.get("kv_cache_dtype") or ""):
        found.append(FP8_KV_CACHE)
    return tuple(found)
