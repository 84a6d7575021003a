"""The seeded order in which a task's items run, and its chunks: shared by the runner (which
runs them) and the analysis (which reads the looks in the same order). Pure numpy."""

from __future__ import annotations

import zlib

import numpy as np


def item_order(n_items: int, seed: int, task: str) -> np.ndarray:
    """The seeded random order in which a task's items run (indices 0..n_items-1)."""
    rng = np.random.default_rng([seed, zlib.crc32(task.encode()), 0x5E0])
    return rng.permutation(n_items)


def chunks(order: np.ndarray, size: int) -> list[np.ndarray]:
    return [order[i:i + size] for i in range(0, len(order), size)]
