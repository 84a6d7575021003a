"""Which machine a run ran on, for summary.json (`platform`) and the report's header: the
suite's own machine (evals.hardware), and whether the arms' workers ran elsewhere or on
different machines (their manifests' `platform`, e.g. arms reused from a run store that a
CI cache carried from another runner)."""

from __future__ import annotations

from evals.hardware import probe
from evals.paths import ARMS


def run_platform(kind: str, manifests: dict[str, dict]) -> dict:
    """This machine's record, with `role`: whether it ran the arms or only analysed
    outputs made elsewhere (`compare`)."""
    role = "analysed lm-eval outputs made elsewhere" if kind == "compare" else "ran the suite"
    return {**probe().to_dict(), "role": role}


def arm_platforms(manifests: dict[str, dict]) -> dict[str, str]:
    """Each arm's machine in one line, where its worker recorded one."""
    found = {}
    for arm, manifest in manifests.items():
        record = manifest.get("platform") if isinstance(manifest, dict) else None
        if isinstance(record, dict) and record.get("summary"):
            found[arm] = str(record["summary"])
    return found


def platform_warnings(manifests: dict[str, dict]) -> list[str]:
    """A warning when the compared arms' workers ran on machines with different kernels:
    the comparison then measures the machines too."""
    keys = {}
    for arm in ARMS:
        record = (manifests.get(arm) or {}).get("platform")
        if isinstance(record, dict):
            keys[arm] = (record.get("machine"), tuple(record.get("isa") or ()),
                         tuple(record.get("gpus") or ()))
    if len(keys) == 2 and keys["baseline"] != keys["candidate"]:
        shown = arm_platforms(manifests)
        return ["the arms ran on different machines (baseline: "
                f"{shown.get('baseline', 'unknown')}; candidate: "
                f"{shown.get('candidate', 'unknown')}): their kernels differ, so the "
                "comparison measures the machines as well as the change"]
    return []
