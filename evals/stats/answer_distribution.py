"""Did the answer distribution change under sampling? A pooled permutation test over items.

A sampler that does not preserve the target distribution (a speculative-decoding
rejection step that accepts drafts unverified) can move answers between wrong labels, or
sharpen and flatten them, while the mean pass rate barely moves: the rate test cannot see
it. Per item, the two arms' k answers (extracted answers: a choice letter, a number) form
a 2 x C table; its Pearson chi-square statistic of homogeneity,

    X_i^2 = (N^2 / (n_b n_c)) * sum_c (a_c - n_b t_c / N)^2 / t_c,

(a_c the baseline's count of answer c, t_c both arms' count, N = n_b + n_c) measures how
far the arms' answer frequencies are apart, and the statistic is their sum over items.
Its null distribution comes from relabelling samples within each item (Good 2005,
Permutation, Parametric and Bootstrap Tests of Hypotheses, ch. 6, stratified
permutation), so no chi-square approximation is needed for k as small as 4:

* ``pairing='repeat'`` (default): swap the arms of each (item, repeat) pair with
  probability 1/2. Valid when, under "same distribution", repeat r's two samples are
  exchangeable as a pair - true with the per-sample seeds that make an A/A reproduce its
  samples (then the A/A's statistic is 0) and true for independent draws.
* ``pairing='pooled'``: any split of the item's 2k samples into two groups of k. Valid
  only when all 2k samples are exchangeable (independent draws); with seed-paired arms it
  is conservative.

The p-value is (1 + hits) / (B + 1) (Phipson & Smyth 2010, SAGMB 9:39). A change that the
rate test misses is a change in *what* is answered; whether it matters is for the rate
test and the reader to say.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np

from .validation import as_rng, check_alpha, check_positive_int

PAIRINGS = ("repeat", "pooled")
TOP_ITEMS = 5
_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True, slots=True)
class ItemAnswerShift:
    """One item's contribution to the pooled statistic."""

    item: int
    """Index of the item in the inputs."""
    statistic: float
    """Its chi-square statistic X_i^2."""
    null_mean: float
    """The mean of X_i^2 over the relabellings: what "no change" gives."""
    baseline_counts: tuple[tuple[str, int], ...]
    """(answer, count) pairs, most frequent first."""
    candidate_counts: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class DistributionTestResult:
    """Pooled test of "same answer distribution per item" over the repeats."""

    statistic: float
    """Sum over items of the chi-square statistic of homogeneity."""
    pvalue: float
    null_mean: float
    """Mean of the statistic over the relabellings."""
    n_items: int
    repeats: int
    informative_items: int
    """Items whose statistic can change under relabelling (some pair of samples differs
    for 'repeat', some two answers differ for 'pooled'); the others add nothing."""
    top_items: tuple[ItemAnswerShift, ...]
    """Up to five items whose statistic exceeds its null mean the most, largest first."""
    alpha: float
    pairing: str
    n_resamples: int

    @property
    def changed(self) -> bool:
        """The distributions differ at level alpha."""
        return self.pvalue <= self.alpha


def _as_answers(values: Any, name: str) -> list[list[Hashable]]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ValueError(f"{name} must be a list with one list of answers per item; got "
                         f"{type(values).__name__}.")
    rows = []
    for index, row in enumerate(values):
        if isinstance(row, (str, bytes)) or not isinstance(row, (Sequence, np.ndarray)):
            raise ValueError(f"{name}[{index}] must be the item's list of k answers; got "
                             f"{type(row).__name__}.")
        for answer in row:
            try:
                hash(answer)
            except TypeError:
                raise ValueError(f"{name}[{index}] holds an unhashable answer {answer!r}; "
                                 "answers must be strings or other labels.") from None
        rows.append(list(row))
    return rows


def _codes(baseline: Any, candidate: Any) -> tuple[np.ndarray, list[list[Hashable]]]:
    """(n, 2k) integer codes per item (baseline's k first), and each item's labels."""
    base = _as_answers(baseline, "baseline_answers")
    cand = _as_answers(candidate, "candidate_answers")
    if len(base) != len(cand):
        raise ValueError(f"baseline_answers has {len(base)} items but candidate_answers has "
                         f"{len(cand)}; give the same items in the same order.")
    if not base:
        raise ValueError("baseline_answers is empty; at least one item is needed.")
    k = len(base[0])
    for arm, rows in (("baseline_answers", base), ("candidate_answers", cand)):
        for index, row in enumerate(rows):
            if len(row) != k or k == 0:
                raise ValueError(
                    f"{arm}[{index}] has {len(row)} answers but baseline_answers[0] has {k}; "
                    "every item needs the same repeats (k >= 1) in both arms.")
    codes = np.empty((len(base), 2 * k), dtype=np.int64)
    labels = []
    for index, (b, c) in enumerate(zip(base, cand)):
        seen: dict[Hashable, int] = {}
        codes[index] = [seen.setdefault(answer, len(seen)) for answer in b + c]
        labels.append(list(seen))
    return codes, labels


def _item_statistics(first: np.ndarray, totals: np.ndarray, k: int) -> np.ndarray:
    """X_i^2 per item for the groups' first-arm codes (..., n, k); totals (n, C)."""
    n, n_labels = totals.shape
    lead = first.shape[:-2]
    flat = (np.arange(int(np.prod(lead, dtype=np.int64)) * n).reshape(*lead, n, 1) * n_labels
            + first)
    counts = np.bincount(flat.ravel(), minlength=flat.size // k * n_labels)
    counts = counts.reshape(*lead, n, n_labels)
    expected = totals / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        cells = np.where(totals > 0, (counts - expected) ** 2 / totals, 0.0)
    return 4.0 * cells.sum(axis=-1)  # N^2 / (k * k) with N = 2k


def _relabelled(codes: np.ndarray, k: int, pairing: str, size: int,
                rng: np.random.Generator) -> np.ndarray:
    """First-arm codes of `size` relabellings, shape (size, n, k)."""
    n = codes.shape[0]
    if pairing == "repeat":
        swap = rng.random((size, n, k)) < 0.5
        return np.where(swap, codes[None, :, k:], codes[None, :, :k])
    shuffled = rng.permuted(np.broadcast_to(codes, (size, *codes.shape)), axis=-1)
    return shuffled[..., :k]


def _counts(labels: list[Hashable], codes: np.ndarray) -> tuple[tuple[str, int], ...]:
    counted = Counter(int(c) for c in codes)
    return tuple((str(labels[c]), m) for c, m in counted.most_common())


def answer_distribution_test(baseline_answers: Any, candidate_answers: Any, *,
                             alpha: float = 0.05, n_resamples: int = 999,
                             pairing: str = "repeat",
                             seed: int | np.random.Generator = 0) -> DistributionTestResult:
    """Test whether the two arms' answer distributions differ at any item, pooled over items.

    ``baseline_answers`` and ``candidate_answers`` hold, per item (same order), the k
    answers of each arm's repeats, repeat r of both arms at the same position. Answers are
    compared as labels (normalize them upstream: "B" and " B" are different answers).
    """
    alpha = check_alpha(alpha)
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {', '.join(map(repr, PAIRINGS))}; "
                         f"got {pairing!r}.")
    rng = as_rng(seed)
    codes, labels = _codes(baseline_answers, candidate_answers)
    n, k = codes.shape[0], codes.shape[1] // 2
    n_labels = 2 * k
    totals = np.zeros((n, n_labels))
    np.add.at(totals, (np.repeat(np.arange(n), 2 * k), codes.ravel()), 1.0)
    observed_items = _item_statistics(codes[:, :k], totals, k)
    observed = float(observed_items.sum())
    tolerance = 1e-9 * max(observed, 1.0)
    hits, null_total, null_items = 0, 0.0, np.zeros(n)
    rows = max(1, _CHUNK_CELLS // (n * n_labels))
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        per_item = _item_statistics(_relabelled(codes, k, pairing, size, rng), totals, k)
        sums = per_item.sum(axis=1)
        hits += int(np.count_nonzero(sums >= observed - tolerance))
        null_total += float(sums.sum())
        null_items += per_item.sum(axis=0)
    null_items /= n_resamples
    if pairing == "repeat":
        informative = int(np.count_nonzero((codes[:, :k] != codes[:, k:]).any(axis=1)))
    else:
        informative = int(np.count_nonzero((codes != codes[:, :1]).any(axis=1)))
    excess = observed_items - null_items
    order = [int(i) for i in np.argsort(-excess, kind="stable")[:TOP_ITEMS] if excess[i] > 0]
    top = tuple(ItemAnswerShift(
        item=i, statistic=float(observed_items[i]), null_mean=float(null_items[i]),
        baseline_counts=_counts(labels[i], codes[i, :k]),
        candidate_counts=_counts(labels[i], codes[i, k:])) for i in order)
    return DistributionTestResult(
        statistic=observed, pvalue=(hits + 1) / (n_resamples + 1),
        null_mean=null_total / n_resamples, n_items=n, repeats=k,
        informative_items=informative, top_items=top, alpha=alpha, pairing=pairing,
        n_resamples=n_resamples)
