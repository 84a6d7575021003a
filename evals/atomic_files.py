"""Atomic writes: a crash leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_json_atomic(path: Path, data: dict, *, sort_keys: bool = True) -> None:
    """Write-then-rename, so a crash leaves either the old file or the new one, never half.
    `sort_keys=False` keeps the dict's order (e.g. schema_version first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=sort_keys, default=str)
        handle.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
    os.replace(tmp, path)
