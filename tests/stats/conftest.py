"""Shared helpers for the statistics tests."""

from __future__ import annotations

import numpy as np
import pytest


def pairs_from_counts(
    both_correct: int,
    correct_to_wrong: int,
    wrong_to_correct: int,
    both_wrong: int,
    rng: np.random.Generator | None = None,
):
    """Baseline and candidate 0/1 arrays with the given paired 2x2 table (optionally shuffled)."""
    baseline = np.array(
        [1] * both_correct + [1] * correct_to_wrong + [0] * wrong_to_correct + [0] * both_wrong,
        dtype=float,
    )
    candidate = np.array(
        [1] * both_correct + [0] * correct_to_wrong + [1] * wrong_to_correct + [0] * both_wrong,
        dtype=float,
    )
    if rng is not None:
        order = rng.permutation(baseline.size)
        baseline, candidate = baseline[order], candidate[order]
    return baseline, candidate


@pytest.fixture
def make_pairs():
    return pairs_from_counts


def simulate_pairs(
    rng: np.random.Generator, reps: int, n: int, p_loss: float, p_gain: float, accuracy: float = 0.6
):
    """``reps`` x ``n`` boolean baseline/candidate arrays.

    Baseline items are correct with probability ``accuracy``; the candidate loses a
    correct item with overall probability ``p_loss`` and gains a wrong one with
    overall probability ``p_gain`` (both as shares of all items).
    """
    baseline = rng.random((reps, n)) < accuracy
    u = rng.random((reps, n))
    candidate = baseline.copy()
    candidate[baseline & (u < p_loss / accuracy)] = False
    candidate[~baseline & (u < p_gain / (1.0 - accuracy))] = True
    return baseline, candidate


@pytest.fixture
def simulate():
    return simulate_pairs
