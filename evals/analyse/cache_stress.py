"""Cache stress: does an arm answer the same items differently once its cache is warm?

The runner runs such an arm's items twice in one engine (cold, then warm in another
order). A stateless engine gives the same answer both times up to its ordinary
nondeterminism; a stateful bug (a prefix cache serving wrong blocks, a draft model
reading stale state) shows as warm != cold. This module summarises the paired
cold/warm items of one task; the warm pass is also compared against the baseline as an
ordinary gated task, `<task> (warm cache)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from evals import stats
from evals.pair.pairing import PairedTask

WARM_SUFFIX = " (warm cache)"


@dataclass(frozen=True, slots=True)
class WarmColdCheck:
    arm: str
    task: str
    n: int
    outputs_changed: int
    """Items whose extracted answer differs between the cold and the warm pass."""
    cold_correct_warm_wrong: int
    cold_wrong_warm_correct: int
    pvalue: float | None
    """Exact two-sided McNemar test of "warm and cold are equally accurate"."""
    degenerate: str | None

    @property
    def disagreement(self) -> float:
        return self.outputs_changed / self.n if self.n else 0.0


def warm_vs_cold(arm: str, paired: PairedTask) -> WarmColdCheck:
    """`paired`: the cold pass as baseline, the warm pass as candidate."""
    changed = sum(1 for b, c in zip(paired.baseline_records, paired.candidate_records)
                  if b.prediction != c.prediction)
    if paired.is_binary:
        counts = stats.flip_counts(paired.baseline, paired.candidate)
        test = stats.mcnemar_exact_from_counts(counts, alternative="two-sided")
        lost, gained, p, note = (counts.correct_to_wrong, counts.wrong_to_correct,
                                 float(test.pvalue), test.degenerate)
    else:
        diff = paired.candidate - paired.baseline
        lost, gained, p = int((diff < 0).sum()), int((diff > 0).sum()), None
        note = "metric is not 0/1: no McNemar test"
    return WarmColdCheck(arm=arm, task=paired.task, n=paired.n, outputs_changed=changed,
                         cold_correct_warm_wrong=lost, cold_wrong_warm_correct=gained,
                         pvalue=p, degenerate=note)


def describe(check: WarmColdCheck) -> str:
    if check.outputs_changed == 0:
        return (f"cache stress, {check.arm} arm, {check.task}: warm and cold passes agree on "
                f"all {check.n} items")
    return (f"cache stress, {check.arm} arm, {check.task}: the warm-cache pass changed "
            f"{check.outputs_changed} of {check.n} answers ({check.disagreement:.1%}); "
            f"{check.cold_correct_warm_wrong} correct->wrong, {check.cold_wrong_warm_correct} "
            f"wrong->correct" + (f" (two-sided McNemar p={check.pvalue:.3g})"
                                 if check.pvalue is not None else ""))
