"""Where the store keeps things: index.sqlite and runs/<run_id>/{manifest.json,items.parquet}.

While a run is re-recorded, the committed files are kept as hard links named
`manifest.prev.json` and `items.prev.parquet` until the index commits the new ones.
"""

from __future__ import annotations

import os
from pathlib import Path

from evals.errors import UserError
from evals.paths import REPORTS_DIR

DEFAULT_ROOT = REPORTS_DIR / "store"
ENV_VAR = "EVALS_STORE"
INDEX_FILE = "index.sqlite"
RUNS_DIR = "runs"
MANIFEST_FILE = "manifest.json"
ITEMS_FILE = "items.parquet"
PREVIOUS_MANIFEST = "manifest.prev.json"
PREVIOUS_ITEMS = "items.prev.parquet"


def default_root() -> Path:
    """$EVALS_STORE when set, else reports/store/ in the repository."""
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else DEFAULT_ROOT


def check_run_id(run_id: object, where: str) -> str:
    """A run id names a directory: one non-empty path component."""
    if not isinstance(run_id, str) or not run_id or run_id in (".", "..") \
            or any(c in run_id for c in "/\\\0") or run_id != run_id.strip():
        raise UserError(f"{where}: run_id {run_id!r} cannot name a store directory (it must be "
                        "one non-empty path component without slashes).")
    return run_id


class StoreLayout:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.index = self.root / INDEX_FILE
        self.runs = self.root / RUNS_DIR

    def run_dir(self, run_id: str) -> Path:
        return self.runs / run_id

    def manifest(self, run_id: str) -> Path:
        return self.run_dir(run_id) / MANIFEST_FILE

    def items(self, run_id: str) -> Path:
        return self.run_dir(run_id) / ITEMS_FILE

    def previous_manifest(self, run_id: str) -> Path:
        return self.run_dir(run_id) / PREVIOUS_MANIFEST

    def previous_items(self, run_id: str) -> Path:
        return self.run_dir(run_id) / PREVIOUS_ITEMS
