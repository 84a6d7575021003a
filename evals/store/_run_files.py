"""A run's two files, replaced so that the committed generation always stays readable.

Each record writes a new generation (a random token, inside both files); the index row
names the committed one. Re-recording first keeps the committed files as hard links
(`*.prev.*`), then replaces the files, then commits the index, then drops the links. A
crash at any point leaves a readable pair: before the commit readers fall back to the
`.prev` files, after it they read the new ones. The next record of the run rolls back
(or clears) what a crash left behind.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from evals.errors import UserError
from evals.store._items import items_generation, read_items
from evals.store._layout import StoreLayout
from evals.store._manifest import read_manifest

T = TypeVar("T")


def _manifest_generation(path: Path) -> str | None:
    return read_manifest(path).get("generation")


def _generation_or_none(generation_of: Callable[[Path], str | None], path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        return generation_of(path)
    except UserError:
        return None


def _read_committed(current: Path, previous: Path, committed: str | None,
                    read: Callable[[Path], T], generation_of: Callable[[T], str | None]) -> T:
    """Current file if it holds the committed generation, else its `.prev` twin, else a
    UserError naming the current file."""
    error: UserError | None = None
    try:
        data = read(current)
        if committed is None or generation_of(data) == committed:
            return data
    except UserError as exc:
        error = exc
    if previous.exists():
        try:
            data = read(previous)
            if generation_of(data) == committed:
                return data
        except UserError:
            pass
    if error is not None:
        raise error
    raise UserError(f"{current}: holds another generation than the index has committed (a "
                    "record was interrupted and left files that do not match); record the run "
                    "again.")


class RunFiles:
    """manifest.json and items.parquet of one run, with their `.prev` twins."""

    def __init__(self, layout: StoreLayout, run_id: str):
        self.directory = layout.run_dir(run_id)
        self.manifest, self.previous_manifest = layout.manifest(run_id), \
            layout.previous_manifest(run_id)
        self.items, self.previous_items = layout.items(run_id), layout.previous_items(run_id)
        self._pairs = ((self.manifest, self.previous_manifest, _manifest_generation),
                       (self.items, self.previous_items, items_generation))

    def read_manifest(self, committed: str | None) -> dict:
        return _read_committed(self.manifest, self.previous_manifest, committed, read_manifest,
                               lambda m: m.get("generation"))

    def read_items(self, committed: str | None) -> pa.Table:
        table, _ = _read_committed(self.items, self.previous_items, committed, read_items,
                                   lambda pair: pair[1])
        return table

    def check(self, committed: str | None) -> str | None:
        """Why the committed files cannot be read (reads the manifest and the Parquet
        footer only), or None."""
        try:
            self.read_manifest(committed)
            _read_committed(self.items, self.previous_items, committed, items_generation,
                            lambda generation: generation)
        except UserError as exc:
            return str(exc)
        return None

    def consistent_generation(self) -> str | None:
        """With no index to ask (a rebuild): the generation both current files hold, else
        the one both `.prev` files hold, else None."""
        for manifest, items in ((self.manifest, self.items),
                                (self.previous_manifest, self.previous_items)):
            generation = _generation_or_none(_manifest_generation, manifest)
            if generation and generation == _generation_or_none(items_generation, items):
                return generation
        return None

    def recover(self, committed: str | None) -> None:
        """Before a write: make the current files hold the committed generation again."""
        for current, previous, generation_of in self._pairs:
            if committed is None:  # leftovers of a first record that never committed
                current.unlink(missing_ok=True)
                previous.unlink(missing_ok=True)
            elif _generation_or_none(generation_of, current) == committed:
                previous.unlink(missing_ok=True)
            elif _generation_or_none(generation_of, previous) == committed:
                os.replace(previous, current)

    def keep_previous(self) -> None:
        """Hard-link the committed files to their `.prev` names (copy where links fail)."""
        for current, previous, _ in self._pairs:
            if not current.exists():
                continue
            previous.unlink(missing_ok=True)
            try:
                os.link(current, previous)
            except OSError:
                tmp = previous.with_name(previous.name + ".tmp")
                shutil.copy2(current, tmp)
                os.replace(tmp, previous)

    def drop_previous(self) -> None:
        for _, previous, _ in self._pairs:
            previous.unlink(missing_ok=True)
