"""The seeded order in which a task's items run, and its chunks: shared by the runner (which
runs them) and the analysis (which reads the looks in the same order); and a sequential
run's error budget, split between the interim looks and the final tests (why:
evals.analyse.early_stop). Pure numpy."""

from __future__ import annotations

import zlib

import numpy as np


def item_order(n_items: int, seed: int, task: str) -> np.ndarray:
    """The seeded random order in which a task's items run (indices 0..n_items-1)."""
    rng = np.random.default_rng([seed, zlib.crc32(task.encode()), 0x5E0])
    return rng.permutation(n_items)


def chunks(order: np.ndarray, size: int) -> list[np.ndarray]:
    return [order[i:i + size] for i in range(0, len(order), size)]


SEQUENTIAL_SHARE = 0.5  # of alpha, spent on the interim looks; the rest on the final test


def look_alpha(alpha: float, gated_tasks: int) -> float:
    """Alpha of one task's interim looks."""
    return alpha * SEQUENTIAL_SHARE / max(gated_tasks, 1)


def final_alpha(alpha: float) -> float:
    """Alpha of the fixed-sample tests for tasks that ran all their items."""
    return alpha * (1 - SEQUENTIAL_SHARE)


def sequential_alpha(config) -> float:
    """Alpha of each task's interim looks in a config's sequential run (an ABConfig)."""
    return look_alpha(config.gate.alpha, sum(1 for t in config.tasks if t.gate))
