"""Per-task analysis of paired samples: the numbers a verdict and a report are made of.

Takes `PairedTask` data (not lm-eval or engine objects) and returns frozen results.
Binary metrics get the exact McNemar test, Tango's non-inferiority score test and
interval, flips and the minimum detectable effect; any metric gets a seeded paired
bootstrap interval; classification tasks get confusion matrices and a test of
marginal homogeneity of the predicted labels; generative tasks a length-shift test.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from evals import stats
from evals.pair.pairing import PairedTask
from evals.stats.intervals import interval_level
from evals.analyse.early_stop import SequentialSummary
from evals.analyse.rate_results import AnswerDistribution, RepeatsSummary
from evals.plan.schedule import final_alpha

MAX_CLASS_LABELS = 12
POWER_FOR_MDE = 0.8


@dataclass(frozen=True, slots=True)
class LabelAnalysis:
    categories: tuple[str, ...]
    confusion_baseline: tuple[tuple[int, ...], ...]
    confusion_candidate: tuple[tuple[int, ...], ...]
    per_class_baseline: tuple[float | None, ...]
    per_class_candidate: tuple[float | None, ...]
    predicted_share_baseline: tuple[float, ...]
    predicted_share_candidate: tuple[float, ...]
    homogeneity_statistic: float
    homogeneity_pvalue: float
    homogeneity_df: int
    homogeneity_note: str | None


@dataclass(frozen=True, slots=True)
class LengthAnalysis:
    mean_chars_baseline: float
    mean_chars_candidate: float
    pvalue: float
    note: str | None
    empty_share_baseline: float
    empty_share_candidate: float


@dataclass(frozen=True, slots=True)
class TaskAnalysis:
    task: str
    metric: str
    filter: str
    gated: bool
    n: int
    binary: bool
    baseline_mean: float
    candidate_mean: float
    delta: float
    ci_low: float
    ci_high: float
    ci_method: str
    regression_pvalue: float
    regression_test: str
    noninferiority_pvalue: float
    noninferiority_test: str
    correct_to_wrong: int
    wrong_to_correct: int
    flip_rate: float
    mde: float | None
    mde_note: str | None
    bootstrap_low: float
    bootstrap_high: float
    degenerate: str | None
    labels: LabelAnalysis | None
    lengths: LengthAnalysis | None
    noise_flip_rate: float | None = None
    """Share of items whose score changed between two runs of the baseline (A/A), if run."""
    noise_flips: int | None = None
    sequential: SequentialSummary | None = None
    """Interim looks of an opt-in sequential run; None for fixed-sample runs."""
    clusters: int | None = None
    """Clusters of a clustered task (`cluster:`); its tests are then cluster-robust."""
    design_effect: float | None = None
    """Variance inflation from the clustering, (clustered SE / i.i.d. SE)^2."""
    repeats: RepeatsSummary | None = None
    """A sampled task (`repeats: k`): decided by the per-item pass-rate test
    (evals.analyse.repeats_analysis); None for one sample per item."""
    answer_distribution: AnswerDistribution | None = None
    """A sampled task's answer-distribution check (evals.analyse.repeats_analysis)."""


def task_rng(seed: int, task: str) -> np.random.Generator:
    """One independent, reproducible stream per (seed, task)."""
    return np.random.default_rng([seed, zlib.crc32(task.encode())])


def _label_codes(raw: list[str], code_of: dict[str, int], other: int) -> np.ndarray:
    """Codes of raw labels after strip().lower(); normalised once per distinct value, not
    once per item (a dict, not pandas: importing pandas cost every label task ~0.3 s)."""
    codes: dict[str, int] = {}
    for value in raw:
        if value not in codes:
            codes[value] = code_of.get(str(value).strip().lower(), other)
    return np.fromiter((codes[value] for value in raw), dtype=np.intp, count=len(raw))


def _labels(paired: PairedTask) -> LabelAnalysis | None:
    raw_targets = [r.target for r in paired.baseline_records]
    targets = {str(t).strip().lower() for t in set(raw_targets)}
    categories = sorted(targets)
    choices = paired.baseline_records[0].choices
    if choices:
        categories = [c.strip().lower() for c in choices]
    if not 2 <= len(categories) <= MAX_CLASS_LABELS or paired.n < 5 * len(categories):
        return None
    cats = tuple(categories) + ("(other)",)

    code_of = {c: i for i, c in enumerate(cats)}
    other = len(categories)  # the statistics take codes 0..k-1
    pred_b = _label_codes([r.prediction for r in paired.baseline_records], code_of, other)
    pred_c = _label_codes([r.prediction for r in paired.candidate_records], code_of, other)
    targets = _label_codes(raw_targets, code_of, other)
    index = tuple(range(len(cats)))
    cm_b = stats.confusion_matrix(targets, pred_b, index)
    cm_c = stats.confusion_matrix(targets, pred_c, index)
    pcb = stats.per_class_accuracy(targets, pred_b, index)
    pcc = stats.per_class_accuracy(targets, pred_c, index)
    mh = stats.marginal_homogeneity(pred_b, pred_c, index)
    share_b = np.bincount(pred_b, minlength=len(cats)) / paired.n
    share_c = np.bincount(pred_c, minlength=len(cats)) / paired.n
    return LabelAnalysis(
        categories=cats,
        confusion_baseline=tuple(tuple(int(x) for x in row) for row in cm_b),
        confusion_candidate=tuple(tuple(int(x) for x in row) for row in cm_c),
        per_class_baseline=tuple(None if x is None else float(x) for x in pcb.accuracy),
        per_class_candidate=tuple(None if x is None else float(x) for x in pcc.accuracy),
        predicted_share_baseline=tuple(float(x) for x in share_b),
        predicted_share_candidate=tuple(float(x) for x in share_c),
        homogeneity_statistic=float(mh.statistic), homogeneity_pvalue=float(mh.pvalue),
        homogeneity_df=int(mh.df), homogeneity_note=mh.degenerate)


def _lengths(paired: PairedTask) -> LengthAnalysis | None:
    if paired.baseline_records[0].choices:
        return None  # loglikelihood tasks generate nothing
    texts_b = [r.response for r in paired.baseline_records]
    texts_c = [r.response for r in paired.candidate_records]
    len_b = np.array([len(t) for t in texts_b], dtype=float)
    len_c = np.array([len(t) for t in texts_c], dtype=float)
    shift = stats.paired_length_shift(len_b, len_c)
    empty = stats.empty_output_shift(texts_b, texts_c)
    return LengthAnalysis(
        mean_chars_baseline=float(len_b.mean()), mean_chars_candidate=float(len_c.mean()),
        pvalue=float(shift.pvalue), note=shift.degenerate,
        empty_share_baseline=float(empty.share_baseline),
        empty_share_candidate=float(empty.share_candidate))


def noise_floor(rerun: PairedTask) -> tuple[float, int]:
    """Self-disagreement of the baseline (paired with its own second run): the share and
    count of items whose score changed."""
    changed = int(np.sum(rerun.baseline != rerun.candidate))
    return changed / rerun.n, changed


def _mde(n: int, discordance: float, alpha: float, margin: float) -> tuple[float | None,
                                                                        str | None]:
    """The exact McNemar test's minimum detectable drop, or why there is none."""
    if discordance <= 0:
        return None, "no item changed between the arms, so the discordance is 0"
    try:
        return stats.mde_paired(n, discordance, alpha, POWER_FOR_MDE, method="exact"), None
    except ValueError:
        pass
    try:
        needed = stats.items_needed_for_drop(margin, min(max(discordance, margin), 0.999),
                                             alpha, POWER_FOR_MDE, method="exact")
        more = f"; about {needed} items are needed to detect a drop of {margin * 100:.1f} pts"
    except ValueError:
        more = ""
    return None, (f"with {n} items and {discordance:.1%} of them changing, no drop is "
                  f"detectable with {POWER_FOR_MDE:.0%} power{more}")


def unchanged_items_bound(n: int, margin: float, alpha: float, pvalue: float, low: float,
                          high: float) -> tuple[float, float, float, str]:
    """A non-inferiority p-value and interval of n items none of which changed, no more
    certain than n 0/1 items with no flip (Tango's test and interval with no discordant
    pair): the larger p, the hull of the intervals, and the words that say so.

    A test of the differences has no variation to go on when every difference is 0, yet
    n unchanged items cannot rule out that a few items break outright (with 40 items, a
    break of 3% of them goes unseen 30% of the time): such a task is no more certain than
    this, on any metric in accuracy units."""
    tango = stats.tango_noninferiority_from_counts(
        stats.FlipCounts(n=n, both_correct=n, both_wrong=0, correct_to_wrong=0,
                         wrong_to_correct=0), margin, alpha)
    ci = tango.confidence_interval(interval_level(alpha))
    return (max(pvalue, float(tango.pvalue)), min(low, float(ci.low)), max(high, float(ci.high)),
            f"; no item changed, so no more certain than {n} items with no flip (Tango)")


def _clustered(paired: PairedTask, base: dict, clusters, alpha: float,
               margin: float) -> TaskAnalysis:
    """A 0/1 task with clustered items: the cluster-robust t-tests and the exact tests of an
    unclustered task, each reporting the more conservative of the two.

    Clustering can only lose information relative to independent items, so a clustered
    task is never more certain than the same items unclustered. The cluster-robust test
    guards against flips that come in clusters; the exact McNemar test and Tango's score
    test guard against few flips, where the cluster-robust standard error is degenerate (0
    when no item changed: a zero-width interval) or unreliable (anti-conservative with one
    or two flips). The larger of two valid p-values is a valid, conservative p-value, and
    the hull of two intervals covers the difference at least as often as either, so the
    regression and non-inferiority p-values are the larger of each pair, the interval is
    the hull of the cluster-robust t interval and Tango's, and the MDE the larger of the
    two tests' MDEs.
    """
    counts = stats.flip_counts(paired.baseline, paired.candidate)
    test = stats.clustered_paired_test(paired.candidate - paired.baseline, clusters, margin,
                                       alpha)
    mcnemar = stats.mcnemar_exact_from_counts(counts, alternative="less")
    tango = stats.tango_noninferiority_from_counts(counts, margin, alpha)
    level = interval_level(alpha)
    robust_ci, tango_ci = test.confidence_interval(level), tango.confidence_interval(level)
    mde, mde_note = _mde(paired.n, float(counts.flip_rate), alpha, margin)
    if mde is not None and test.standard_error > 0:
        mde = max(mde, float((sps.norm.isf(alpha) + sps.norm.isf(1 - POWER_FOR_MDE))
                             * test.standard_error))
    design = f"{test.n_clusters} clusters, design effect {test.design_effect:.2f}"
    return TaskAnalysis(
        **base, binary=True, ci_low=min(robust_ci.low, tango_ci.low),
        ci_high=max(robust_ci.high, tango_ci.high),
        ci_method=(f"hull of the cluster-robust t interval and the Tango score interval "
                   f"({level:.0%}, {test.n_clusters} clusters)"),
        regression_pvalue=max(test.pvalue_regression, float(mcnemar.pvalue)),
        regression_test=(f"cluster-robust t-test and exact McNemar, one-sided, the larger p "
                         f"({design})"),
        noninferiority_pvalue=max(test.pvalue_noninferiority, float(tango.pvalue)),
        noninferiority_test=(f"cluster-robust t-test and Tango score test at margin "
                             f"{margin:g}, the larger p"),
        correct_to_wrong=counts.correct_to_wrong, wrong_to_correct=counts.wrong_to_correct,
        flip_rate=float(counts.flip_rate), mde=mde, mde_note=mde_note,
        degenerate=mcnemar.degenerate, clusters=test.n_clusters,
        design_effect=test.design_effect)


def analyse_task(paired: PairedTask, *, gated: bool, alpha: float, margin: float, seed: int,
                 n_resamples: int, noise: tuple[float, int] | None = None,
                 sequential: SequentialSummary | None = None,
                 clusters=None) -> TaskAnalysis:
    """`clusters`: one label per item (evals.pair.clusters) for a 0/1 task whose items are
    grouped; its tests, interval and MDE are then the more conservative of the
    cluster-robust and the exact ones (`_clustered`)."""
    if sequential is not None and not sequential.stopped_early:
        # the looks spent SEQUENTIAL_SHARE of alpha: the fixed tests, their interval and
        # MDE are at the rest (evals.decide.verdict scales the p-values to compare with alpha)
        alpha = final_alpha(alpha)
    boot = stats.paired_bootstrap(paired.baseline, paired.candidate, rng=task_rng(seed, paired.task),
                                  n_resamples=n_resamples, confidence_level=interval_level(alpha))
    base = dict(task=paired.task, metric=paired.metric, filter=paired.filter, gated=gated,
                n=paired.n, baseline_mean=float(paired.baseline.mean()),
                candidate_mean=float(paired.candidate.mean()),
                delta=float(paired.candidate.mean() - paired.baseline.mean()),
                bootstrap_low=boot.low, bootstrap_high=boot.high,
                labels=_labels(paired), lengths=_lengths(paired),
                noise_flip_rate=None if noise is None else noise[0],
                noise_flips=None if noise is None else noise[1], sequential=sequential)
    if paired.is_binary and clusters is not None:
        return _clustered(paired, base, clusters, alpha, margin)
    if paired.is_binary:
        counts = stats.flip_counts(paired.baseline, paired.candidate)
        mcnemar = stats.mcnemar_exact_from_counts(counts, alternative="less")
        tango = stats.tango_noninferiority_from_counts(counts, margin, alpha)
        ci = tango.confidence_interval(interval_level(alpha))
        mde, mde_note = _mde(paired.n, float(counts.flip_rate), alpha, margin)
        return TaskAnalysis(
            **base, binary=True, ci_low=ci.low, ci_high=ci.high,
            ci_method=f"Tango score interval ({interval_level(alpha):.0%})",
            regression_pvalue=float(mcnemar.pvalue), regression_test="exact McNemar, one-sided",
            noninferiority_pvalue=float(tango.pvalue),
            noninferiority_test=f"Tango score test at margin {margin:g}",
            correct_to_wrong=counts.correct_to_wrong, wrong_to_correct=counts.wrong_to_correct,
            flip_rate=float(counts.flip_rate), mde=mde, mde_note=mde_note,
            degenerate=mcnemar.degenerate)
    # continuous metric: paired t-test for the drop, bootstrap bound for non-inferiority
    diff = paired.candidate - paired.baseline
    ci_low, ci_high, bounded = boot.low, boot.high, ""
    if np.all(diff == 0) or paired.n < 2:
        p_reg, p_ni, note = 1.0, 1.0, "a single item"
        if paired.n >= 2:  # no variation: as many 0/1 items with no flip, at best
            p_ni, ci_low, ci_high, bounded = unchanged_items_bound(
                paired.n, margin, alpha, 0.0, ci_low, ci_high)
            note = "all paired differences are zero"
    else:
        p_reg = float(sps.ttest_rel(paired.candidate, paired.baseline, alternative="less").pvalue)
        p_ni = float(sps.ttest_1samp(diff, -margin, alternative="greater").pvalue)
        note = None
    sd = float(diff.std(ddof=1)) if paired.n > 1 else 0.0
    mde = float((sps.norm.isf(alpha) + sps.norm.isf(1 - POWER_FOR_MDE)) * sd / np.sqrt(paired.n)) \
        if sd > 0 else None
    return TaskAnalysis(
        **base, binary=False, ci_low=ci_low, ci_high=ci_high,
        ci_method=(f"paired percentile bootstrap ({interval_level(alpha):.0%}, {n_resamples} "
                   f"resamples){bounded}"),
        regression_pvalue=p_reg, regression_test="paired t-test, one-sided",
        noninferiority_pvalue=p_ni,
        noninferiority_test=f"one-sample t-test against -{margin:g}{bounded}",
        correct_to_wrong=int(np.sum(diff < 0)), wrong_to_correct=int(np.sum(diff > 0)),
        flip_rate=float(np.mean(diff != 0)), mde=mde,
        mde_note=None if mde is not None else "no variation in the paired differences",
        degenerate=note)
