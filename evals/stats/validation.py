"""Input validation shared by the statistics in :mod:`evals.stats`.

Every public statistic validates its inputs here, so that a user sees one kind of
message: a sentence that says what was wrong, where, and what is allowed.
All helpers raise :class:`ValueError`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

ALTERNATIVES = ("two-sided", "less", "greater")


def as_score_array(values: Any, name: str) -> np.ndarray:
    """Return ``values`` as a finite 1-D float64 array with at least one element."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must hold numbers (per-item scores); it could not be read as numbers: {exc}."
        ) from None
    if array.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (one score per item); it has shape {array.shape}."
        )
    if array.size == 0:
        raise ValueError(f"{name} is empty; at least one item is needed.")
    finite = np.isfinite(array)
    if not finite.all():
        index = int(np.argmin(finite))
        what = "NaN" if np.isnan(array[index]) else str(array[index])
        raise ValueError(
            f"{name} has a non-finite value ({what}) at index {index}; "
            "every item needs a finite score (drop or re-score the item upstream)."
        )
    return array


def as_paired_arrays(
    baseline: Any, candidate: Any, names: tuple[str, str] = ("baseline", "candidate")
) -> tuple[np.ndarray, np.ndarray]:
    """Return two aligned finite 1-D float64 arrays of equal length >= 1.

    Raises ValueError naming the offending array and index for NaN/inf values and
    stating both lengths when they differ.
    """
    first = as_score_array(baseline, names[0])
    second = as_score_array(candidate, names[1])
    if first.shape != second.shape:
        raise ValueError(
            f"{names[0]} has {first.size} items but {names[1]} has {second.size}; "
            "paired statistics need the same items in the same order in both arms."
        )
    return first, second


def as_binary(values: Any, name: str = "scores") -> np.ndarray:
    """Return a boolean array from 0/1 scores (bools, ints or floats).

    Raises ValueError naming the first value that is neither 0 nor 1, and its index.
    """
    array = as_score_array(values, name)
    ok = (array == 0.0) | (array == 1.0)
    if not ok.all():
        index = int(np.argmin(ok))
        raise ValueError(
            f"{name} must be binary (0/1 or False/True), but has the value {array[index]!r} "
            f"at index {index}; use a test for continuous scores instead."
        )
    return array == 1.0


def as_paired_binary(
    baseline: Any, candidate: Any, names: tuple[str, str] = ("baseline", "candidate")
) -> tuple[np.ndarray, np.ndarray]:
    """Return two aligned boolean arrays (see :func:`as_paired_arrays`, :func:`as_binary`)."""
    first, second = as_paired_arrays(baseline, candidate, names)
    return as_binary(first, names[0]), as_binary(second, names[1])


def check_alternative(alternative: str) -> str:
    """Return ``alternative`` if it is one of 'two-sided', 'less', 'greater'."""
    if alternative not in ALTERNATIVES:
        raise ValueError(
            f"alternative must be one of {', '.join(repr(a) for a in ALTERNATIVES)}; "
            f"got {alternative!r}."
        )
    return alternative


def _check_open_unit(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a number strictly between 0 and 1; got {value!r}."
        ) from None
    if not 0.0 < number < 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be a number strictly between 0 and 1; got {value!r}.")
    return number


def check_confidence_level(confidence_level: Any) -> float:
    """Return ``confidence_level`` as a float in the open interval (0, 1)."""
    return _check_open_unit(confidence_level, "confidence_level")


def check_alpha(alpha: Any) -> float:
    """Return the significance level ``alpha`` as a float in (0, 1)."""
    return _check_open_unit(alpha, "alpha")


def check_power(power: Any) -> float:
    """Return the target ``power`` as a float in (0, 1)."""
    return _check_open_unit(power, "power")


def check_probability(value: Any, name: str) -> float:
    """Return ``value`` as a float in (0, 1), for rates such as discordance."""
    return _check_open_unit(value, name)


def check_margin(margin: Any, name: str = "margin") -> float:
    """Return a positive accuracy difference below 1 (0.02 means 2 points)."""
    try:
        number = float(margin)
    except (TypeError, ValueError):
        number = math.nan
    if not 0.0 < number < 1.0:
        raise ValueError(
            f"{name} must be a positive accuracy difference below 1 (0.02 means 2 points); "
            f"got {margin!r}."
        )
    return number


def check_positive_int(value: Any, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int >= ``minimum`` (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def check_generator(rng: Any) -> np.random.Generator:
    """Return ``rng`` if it is a :class:`numpy.random.Generator`."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            "rng must be a numpy.random.Generator, e.g. numpy.random.default_rng(1234); "
            f"got {type(rng).__name__}. Seeded generators keep analyses reproducible."
        )
    return rng


def as_labels(values: Any, n: int, name: str) -> np.ndarray:
    """Return a 1-D array of hashable labels (cluster ids, class labels) of length ``n``."""
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of labels, one per item; got a string.")
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (one label per item); it has shape {array.shape}."
        )
    if array.size != n:
        raise ValueError(
            f"{name} has {array.size} labels but there are {n} items; give one label per item."
        )
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        index = int(np.argmin(np.isfinite(array)))
        raise ValueError(
            f"{name} has a non-finite label at index {index}; every item needs a label."
        )
    if array.dtype.kind == "O" and any(v is None for v in array):
        index = next(i for i, v in enumerate(array) if v is None)
        raise ValueError(
            f"{name} has a missing label (None) at index {index}; every item needs a label."
        )
    return array


def as_categories(categories: Sequence[Any]) -> tuple[Any, ...]:
    """Return the categories as a tuple of distinct labels (at least one)."""
    if isinstance(categories, (str, bytes)):
        raise ValueError("categories must be a sequence of labels, not a single string.")
    result = tuple(categories)
    if not result:
        raise ValueError("categories is empty; list every label the task can produce.")
    if len(set(result)) != len(result):
        seen: set[Any] = set()
        duplicate = next(c for c in result if c in seen or seen.add(c))
        raise ValueError(f"categories must be distinct, but {duplicate!r} appears more than once.")
    return result


def as_outcomes(values: Any, name: str, *, allow_missing: bool = False) -> np.ndarray:
    """Return per-sample outcomes as a float64 array of shape (n_items, k).

    Values are 0/1 outcomes or scores in [0, 1]; with ``allow_missing`` a NaN marks a
    missing sample, but every item needs at least one. Raises ValueError naming the item
    and repeat of the first bad value.
    """
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must hold numbers (one outcome per item and repeat); it could not be "
            f"read as numbers: {exc}."
        ) from None
    if array.ndim != 2 or array.size == 0:
        raise ValueError(
            f"{name} must be a non-empty 2-D array of shape (items, repeats); it has shape "
            f"{array.shape}."
        )
    missing = np.isnan(array)
    bad = ~missing & ~((array >= 0.0) & (array <= 1.0))
    if not allow_missing:
        bad |= missing
    if bad.any():
        item, repeat = (int(i) for i in np.argwhere(bad)[0])
        allowed = "a score in [0, 1]" + (" or NaN for a missing sample" if allow_missing else "")
        value = float(array[item, repeat])
        what = "a missing sample (NaN)" if math.isnan(value) else repr(value)
        raise ValueError(
            f"{name} has {what} at item {item}, repeat {repeat}; each outcome must be "
            f"{allowed}."
        )
    empty = missing.all(axis=1)
    if empty.any():
        raise ValueError(
            f"{name} has no sample at all for item {int(np.argmax(empty))}; every item needs "
            "at least one outcome (drop the item upstream, in both arms)."
        )
    return array


def as_rng(seed: Any) -> np.random.Generator:
    """Return ``seed`` if it is a :class:`numpy.random.Generator`, else a generator seeded
    with it (an integer >= 0)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(
            f"seed must be an integer >= 0 or a numpy.random.Generator; got {seed!r}."
        )
    return np.random.default_rng(int(seed))
