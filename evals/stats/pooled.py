"""One regression test over many tasks: the exact stratified McNemar test.

Holm's per-task decisions cannot see several small drops that no single task shows.
Pooling the discordant pairs of all gated tasks, stratified by task, gives one test of
"no task lost accuracy": conditional on each task's discordant count m_k, its
correct->wrong count B_k is Binomial(m_k, 1/2) under the null, so sum B_k is
Binomial(sum m_k, 1/2) and its upper tail is an exact one-sided p-value. This is the
Mantel-Haenszel test for matched pairs (Mantel & Haenszel 1959, JNCI 22:719-748; for
pairs, Agresti, *Categorical Data Analysis*, 3rd ed., sec. 11.3), in exact conditional
form. It weights each task by its discordant pairs, the information the task carries,
and needs no assumption about how the tasks relate; it tests the *net* drop, so a gain
in one task offsets a drop in another.

Why this and not a combination of per-task p-values (Fisher, Stouffer) or of per-sample
e-values (as in Kübler et al. 2026, arXiv 2602.10144, which pool McNemar evidence across
tasks for one release decision): it is exact at any task size, has no tuning, reduces to
the per-task McNemar test for one task, and its statistic is the pooled flip count the
report already shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from scipy import stats

from .binary import FlipCounts


@dataclass(frozen=True, slots=True)
class PooledMcNemarResult:
    statistic: int
    """Correct->wrong flips summed over the tasks."""
    discordant: int
    """Discordant pairs summed over the tasks."""
    pvalue: float
    """One-sided: P(Binomial(discordant, 1/2) >= statistic); 1 without discordant pairs."""
    chi2: float
    """Mantel-Haenszel chi-square (sum B - sum C)^2 / (sum B + sum C), no continuity
    correction (0 without discordant pairs)."""
    tasks: int


def pooled_mcnemar(counts: list[FlipCounts] | tuple[FlipCounts, ...]) -> PooledMcNemarResult:
    """Exact one-sided stratified McNemar test for a drop over several tasks' flip counts."""
    if not counts:
        raise ValueError("counts must hold the flip counts of at least one task.")
    down = sum(c.correct_to_wrong for c in counts)
    up = sum(c.wrong_to_correct for c in counts)
    total = down + up
    pvalue = 1.0 if total == 0 else float(stats.binom.sf(down - 1, total, 0.5))
    chi2 = 0.0 if total == 0 else (down - up) ** 2 / total
    return PooledMcNemarResult(statistic=down, discordant=total, pvalue=pvalue, chi2=float(chi2),
                               tasks=len(counts))
