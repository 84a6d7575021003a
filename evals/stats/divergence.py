"""How far the candidate's next-token distributions moved from the baseline's.

Accuracy moves only when a change pushes an answer across a decision boundary; a
numerical change (FP8 KV cache, a kernel swap, quantization) moves the distributions
first (Dutta et al. 2024, "Accuracy is Not All You Need", arXiv 2407.09141: flips and
KL divergence are far more sensitive than accuracy; llama.cpp's `--kl-divergence`
reports the same kind of figures between a base and a quantized model).

**Generation items.** Each arm records, per generated token, the chosen token's
log-probability and its top-k alternatives (vLLM `logprobs=k`). Along the *shared
prefix* - the positions up to and including the first one where the two generations
differ - both arms' next-token distributions are conditioned on the same text, so they
can be compared position by position:

* ``coarsened_kl``: KL(baseline || candidate) over a coarsening of the vocabulary: every
  token in both arms' top-k on its own, and one bucket for all other tokens. Both
  distributions' masses on that partition are known exactly, and by the data-processing
  inequality the result is a lower bound of the full-vocabulary KL (equal to it when the
  two top-k lists hold all the mass).
* Δp: the candidate's probability of the token the baseline chose, minus the
  baseline's (llama.cpp's "Δp"), where the candidate's top-k has that token.
* top-1 agreement and the position of the first divergence.

**Multiple-choice items.** The distribution over the choices (the softmax of lm-eval's
per-choice log-likelihoods): exact KL.

**Margins.** The baseline's top-1 minus top-2 log-probability (nats): an item's margin is
its smallest over the generated tokens (a near tie anywhere can flip the answer). A
margin under ``NEAR_TIE_NATS`` is a near tie: bf16 has 8 significant bits, so a logit of
magnitude in [1, 2) is rounded to a step of 2**-7; a change in the last bit of two logits
can swap tokens whose log-probabilities are closer than that.

**The shift test** (``shift_test``). Per item, d = KL(b || c) - KL(b || r), where r is a
second run of the baseline's own config (the A/A noise floor: engine nondeterminism).
"Shifted" means the mean excess E[d] is beyond a margin delta (nats) with confidence: the
one-sided t-test of H0: E[d] <= delta against E[d] > delta, an equivalence-style test like
the accuracy gate's non-inferiority margin. A test of "d is shifted upwards at all" (the
Wilcoxon signed-rank test this replaced) is valid only where c and r are exchangeable
given b. On a GPU they are not: the arms run in a fixed order, and batch composition and
cached versus recomputed KV change the numerics by 1e-7 to 1e-5 nats, so with hundreds of
items every kernel-level difference was "significant" and 2 of 3 A/As of one engine were
flagged. A margin asks how large a shift matters, which exchangeability cannot; it holds
whatever the rerun's noise, since the null is about the size of the excess, not its
source. KL is right-skewed: the t statistic of a right-skewed sample is skewed to the left,
so the one-sided upper test is conservative there (checked by simulation in
tests/stats/test_stats_shift_margin.py; the default delta and the measurements behind it
are gate.shift_margin's, evals.plan.config). The interval is the percentile bootstrap of
mean(d). KL detects change, not harm: a shift beyond delta says the distributions moved
more than engine noise does, not that answers got worse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from .bootstrap import paired_bootstrap
from .intervals import ConfidenceInterval, DEFAULT_CONFIDENCE_LEVEL

NEAR_TIE_NATS = 2.0 ** -7
"""Margins (top-1 minus top-2 log-probability, nats) at or under this are near ties."""

_FLOOR = 1e-12  # a bucket's mass below this is rounding of a mass that is 0
MARGIN_STRATA = (NEAR_TIE_NATS, 0.1, 1.0)
"""Upper edges of the margin strata of ``flip_rates_by_margin`` (the last is open)."""

NO_INFORMATIVE_ITEMS = ("no item's divergence differs between the candidate and the A/A "
                        "rerun (all differences 0): no evidence of a shift (p-value set to 1)")


def _mass(logprob: float) -> float:
    return math.exp(logprob) if logprob > -745 else 0.0


def coarsened_kl(p: Mapping[int, float], q: Mapping[int, float]) -> float:
    """KL(p || q) in nats over {each token in both top-k lists} + {every other token}.

    `p`, `q`: token id -> log-probability (the top-k lists of the two arms at one
    position, the chosen token included). A lower bound of the full-vocabulary KL."""
    shared = p.keys() & q.keys()
    kl = 0.0
    p_rest, q_rest = 1.0, 1.0
    for token in shared:
        pp, qq = _mass(p[token]), _mass(q[token])
        p_rest -= pp
        q_rest -= qq
        if pp > 0:
            kl += pp * (p[token] - q[token])
    p_rest, q_rest = max(p_rest, 0.0), max(q_rest, 0.0)
    if p_rest > _FLOOR:
        kl += p_rest * math.log(p_rest / max(q_rest, _FLOOR))
    return max(kl, 0.0)


def choice_kl(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """Exact KL(b || c) of the two distributions over the choices (softmax of the
    per-choice log-likelihoods)."""
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if b.shape != c.shape or b.size < 2:
        raise ValueError("both arms need the same number (>= 2) of choice log-likelihoods")
    pb = np.exp(b - np.logaddexp.reduce(b))
    log_pb = b - np.logaddexp.reduce(b)
    log_pc = c - np.logaddexp.reduce(c)
    mask = pb > 0
    return float(max(np.sum(pb[mask] * (log_pb[mask] - log_pc[mask])), 0.0))


def top_margin(logprobs: Sequence[float]) -> float | None:
    """Top-1 minus top-2 of a list of log-probabilities (or log-likelihoods); None for
    fewer than two."""
    if len(logprobs) < 2:
        return None
    first, second = sorted(logprobs, reverse=True)[:2]
    return float(first - second)


@dataclass(frozen=True, slots=True)
class ItemDivergence:
    """One item's comparison of the two arms' distributions."""

    kl: tuple[float, ...]
    """KL(baseline || candidate) at each compared position (one value for a choice item)."""
    top1_agree: tuple[bool, ...]
    """Whether both arms' most likely token (choice) was the same, per compared position."""
    delta_p: tuple[float, ...]
    """Candidate minus baseline probability of the baseline's chosen token, per compared
    position where the candidate's top-k has it."""
    first_divergence: int | None
    """The first generated position where the tokens differ (None: none differs)."""
    margin: float | None
    """The baseline's smallest top-1 minus top-2 log-probability over its tokens (choices);
    None where it had fewer than two alternatives."""

    @property
    def mean_kl(self) -> float:
        return float(np.mean(self.kl)) if self.kl else 0.0


def generation_divergence(base_tokens: Sequence[int],
                          base_top: Sequence[Mapping[int, float]],
                          cand_tokens: Sequence[int],
                          cand_top: Sequence[Mapping[int, float]]) -> ItemDivergence:
    """Compares two generations position by position along their shared prefix.

    `*_tokens`: the generated token ids; `*_top`: per position, token id -> log-probability
    (top-k and the chosen token)."""
    if len(base_tokens) != len(base_top) or len(cand_tokens) != len(cand_top):
        raise ValueError("one top-k list per generated token is needed")
    shortest = min(len(base_tokens), len(cand_tokens))
    first = next((i for i in range(shortest) if base_tokens[i] != cand_tokens[i]), None)
    if first is None and len(base_tokens) != len(cand_tokens):
        first = shortest  # one stopped where the other went on
    compared = shortest if first is None else min(first + 1, shortest)
    kl, agree, dp = [], [], []
    for i in range(compared):
        b, c = base_top[i], cand_top[i]
        kl.append(coarsened_kl(b, c))
        agree.append(max(b, key=b.__getitem__) == max(c, key=c.__getitem__))
        token = base_tokens[i]
        if token in c:
            dp.append(_mass(c[token]) - _mass(b[token]))
    margins = [m for m in (top_margin(list(t.values())) for t in base_top) if m is not None]
    return ItemDivergence(tuple(kl), tuple(agree), tuple(dp), first,
                          min(margins) if margins else None)


def choice_divergence(baseline: Sequence[float], candidate: Sequence[float]) -> ItemDivergence:
    """One multiple-choice item: KL of the choice distributions, agreement of the argmax
    choice, Δp of the baseline's choice."""
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    kl = choice_kl(b, c)
    pick = int(np.argmax(b))
    pb = np.exp(b - np.logaddexp.reduce(b))
    pc = np.exp(c - np.logaddexp.reduce(c))
    same = pick == int(np.argmax(c))
    return ItemDivergence((kl,), (same,), (float(pc[pick] - pb[pick]),),
                          None if same else 0, top_margin(list(b)))


@dataclass(frozen=True, slots=True)
class DivergenceSummary:
    """The distribution of per-item mean KL, per-position agreement and Δp over a task."""

    n_items: int
    n_positions: int
    mean_kl: float
    """Mean over items of each item's mean per-position KL (nats)."""
    p95_kl: float
    max_kl: float
    top1_agreement: float
    """Share of compared positions where both arms' most likely token was the same."""
    diverged: int
    """Items whose generations (choices) differ somewhere."""
    median_first_divergence: float | None
    mean_delta_p: float
    delta_p_skew: float | None
    """Sample skewness of Δp (None with fewer than three values or no spread)."""


def summarize(items: Sequence[ItemDivergence]) -> DivergenceSummary:
    if not items:
        raise ValueError("no items to summarize")
    means = np.array([it.mean_kl for it in items])
    agree = [a for it in items for a in it.top1_agree]
    dp = np.array([d for it in items for d in it.delta_p])
    firsts = [it.first_divergence for it in items if it.first_divergence is not None]
    skew = None
    if dp.size >= 3 and np.ptp(dp) > 0:
        skew = float(stats.skew(dp))
    return DivergenceSummary(
        n_items=len(items), n_positions=sum(len(it.kl) for it in items),
        mean_kl=float(means.mean()), p95_kl=float(np.quantile(means, 0.95)),
        max_kl=float(means.max()),
        top1_agreement=float(np.mean(agree)) if agree else 1.0,
        diverged=len(firsts),
        median_first_divergence=float(np.median(firsts)) if firsts else None,
        mean_delta_p=float(dp.mean()) if dp.size else 0.0, delta_p_skew=skew)


@dataclass(frozen=True, slots=True)
class ShiftTestResult:
    """One-sided paired test of "the candidate moved the distributions more than an A/A
    rerun of the baseline does, by more than `margin` nats per item on average" (see the
    module docstring)."""

    statistic: float
    """The t statistic of mean(d) - margin."""
    pvalue: float
    n: int
    """Paired items."""
    n_informative: int
    """Items whose difference is not 0."""
    mean_difference: float
    """mean(KL(b || c) - KL(b || rerun)) over all items, nats."""
    confidence_interval: ConfidenceInterval
    confidence_level: float
    margin: float
    """delta, nats: the mean excess that counts as engine noise (gate.shift_margin)."""
    note: str = ""


def shift_test(kl_candidate: Sequence[float], kl_rerun: Sequence[float], *,
               rng: np.random.Generator, margin: float, confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
               n_resamples: int = 2000) -> ShiftTestResult:
    """Is the mean of KL(b || candidate) - KL(b || rerun) over the items beyond `margin`
    nats? (one-sided t-test of H0: mean <= margin)."""
    if not margin >= 0 or not math.isfinite(margin):
        raise ValueError(f"margin must be a finite number of nats >= 0, got {margin!r}")
    c = np.asarray(kl_candidate, dtype=float)
    r = np.asarray(kl_rerun, dtype=float)
    if c.shape != r.shape or c.ndim != 1 or c.size == 0:
        raise ValueError("kl_candidate and kl_rerun need one value per paired item")
    d = c - r
    informative = int(np.count_nonzero(d))
    boot = paired_bootstrap(r, c, rng=rng, n_resamples=n_resamples,
                            confidence_level=confidence_level)
    interval = ConfidenceInterval(boot.low, boot.high)
    if informative == 0:
        return ShiftTestResult(0.0, 1.0, int(d.size), 0, 0.0, interval, confidence_level,
                               margin, NO_INFORMATIVE_ITEMS)
    mean = float(d.mean())
    if d.size < 2:
        return ShiftTestResult(0.0, 1.0, 1, informative, mean, interval, confidence_level,
                               margin, "one item: no test")
    if float(np.ptp(d)) == 0.0:  # every item the same: the mean is known exactly
        beyond = mean > margin
        return ShiftTestResult(math.inf if beyond else -math.inf, 0.0 if beyond else 1.0,
                               int(d.size), informative, mean, interval, confidence_level,
                               margin)
    result = stats.ttest_1samp(d, popmean=margin, alternative="greater")
    return ShiftTestResult(float(result.statistic), float(result.pvalue), int(d.size),
                           informative, mean, interval, confidence_level, margin)


def flip_rates_by_margin(margins: Sequence[float | None], flipped: Sequence[bool]
                         ) -> list[tuple[str, int, int]]:
    """(stratum label, items, flipped items) per stratum of the baseline's margin."""
    edges = (0.0, *MARGIN_STRATA, math.inf)
    labels = [f"<= {NEAR_TIE_NATS:.4f} (near tie)", f"{NEAR_TIE_NATS:.4f}-{MARGIN_STRATA[1]:g}",
              f"{MARGIN_STRATA[1]:g}-{MARGIN_STRATA[2]:g}", f"> {MARGIN_STRATA[2]:g}"]
    rows = []
    for k, label in enumerate(labels):
        lo, hi = edges[k], edges[k + 1]
        inside = [f for m, f in zip(margins, flipped)
                  if m is not None and (lo < m <= hi or (k == 0 and m <= hi))]
        rows.append((label, len(inside), int(sum(inside))))
    return rows
