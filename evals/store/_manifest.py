"""manifest.json of a stored run: the summary's facts plus what the store derived from them.

The manifest is the source of truth for everything in the index except golden pins:
the index can be rebuilt from the manifests alone. It carries `schema_version`
first; `migrate_manifest` refuses newer versions and migrates older ones. It is built
by `_manifest_builder.build_manifest`.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from evals.errors import UserError
from evals.schemas import STORE_MANIFEST

MANIFEST_SCHEMA_VERSION = STORE_MANIFEST.version


def now_iso() -> str:
    """Now, ISO 8601 in UTC with seconds (the store's one time format)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_manifest(path: Path, manifest: dict) -> None:
    STORE_MANIFEST.write(path, manifest)


def migrate_manifest(data: object, where: Path) -> dict:
    return STORE_MANIFEST.load(data, str(where))


def read_manifest(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: missing; the run's store directory is incomplete "
                        "(record the run again).") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror}).") from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(f"{path}: not valid JSON (truncated or corrupted); record the run "
                        "again.") from None
    return migrate_manifest(data, path)
