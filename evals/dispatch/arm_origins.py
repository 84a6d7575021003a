"""Where an arm's results came from, read from the arms' manifests: light (no runner, no
vLLM client), so the analysis of finished runs can ask without importing the run stage."""

from __future__ import annotations

RERUN = "baseline_rerun"  # the baseline's second run, for the A/A noise floor


def same_engine_run(manifests: dict[str, dict], task: str, arms: tuple[str, ...]) -> str | None:
    """Where two of `arms` got `task`'s results from one engine run (reused from one
    stored arm), or None."""
    origins: dict[str, str] = {}
    for arm in arms:
        record = (manifests.get(arm) or {}).get("tasks", {}).get(task) or {}
        origin = record.get("ran_in")
        if origin and origin in origins:
            return f"{origins[origin]} and {arm} are both {origin}"
        if origin:
            origins[origin] = arm
    return None
