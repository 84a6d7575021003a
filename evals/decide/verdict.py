"""From per-task analyses to PASS / REGRESSION / INCONCLUSIVE, per task and overall.

Decision rule (documented in docs/verdicts.md):

* REGRESSION - the one-sided regression test rejects "no drop" after Holm's
  correction across gated tasks (a union of per-task hypotheses, so it needs the
  correction to keep the family-wise false-alarm rate at alpha);
* PASS - no regression, and non-inferiority at the margin is shown (Tango's score
  test p < alpha). PASS overall needs every gated task to be non-inferior: an
  intersection-union test, which keeps its level without correction (Berger 1982);
* INCONCLUSIVE - neither: the data show no significant drop but cannot exclude a
  drop as large as the margin. The minimum detectable effect is stated.

Sequential runs (opt-in): a task whose interim looks crossed a boundary takes that
decision (REGRESSION or PASS); the others are judged by the rules above at the other
half of alpha (see evals.analyse.early_stop). Reported adjusted p-values are scaled so
that they compare against alpha itself.

Tasks with `gate: false` never change the overall verdict; their regression p-values are
adjusted with Benjamini-Hochberg among themselves (screening many subtasks).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from evals import stats
from evals.analyse.task_analysis import TaskAnalysis
from evals.decide.outcome import Verdict  # noqa: F401  (re-exported: its home is light)
from evals.errors import ExitCode
from evals.plan.schedule import final_alpha, look_alpha
from evals.analyse.exercise import ExerciseReport
from evals.analyse.speed import describe_requirement, describe_speedup


@dataclass(frozen=True, slots=True)
class TaskVerdict:
    task: str
    gated: bool
    verdict: Verdict
    regression_pvalue_adjusted: float
    reason: str


@dataclass(frozen=True, slots=True)
class PooledVerdict:
    """The exact stratified McNemar test over the gated binary tasks (evals.stats.pooled)."""

    tasks: tuple[str, ...]
    correct_to_wrong: int
    wrong_to_correct: int
    pvalue: float
    pvalue_adjusted: float
    """Holm-adjusted together with the per-task tests when it gates, else as is."""
    gates: bool
    significant: bool


@dataclass(frozen=True, slots=True)
class RunVerdict:
    verdict: Verdict
    tasks: tuple[TaskVerdict, ...]
    alpha: float
    margin: float
    correction: str
    reason: str
    pooled: PooledVerdict | None = None

    @property
    def exit_code(self) -> ExitCode:
        return self.verdict.exit_code


def _points(x: float) -> str:
    return f"{x * 100:+.1f} pts"


def _noise(a: TaskAnalysis) -> str:
    if a.noise_flip_rate is None:
        return ""
    if a.flip_rate <= a.noise_flip_rate:
        return (f"; its flips ({a.flip_rate:.1%} of items) do not exceed the A/A noise floor "
                f"({a.noise_flip_rate:.1%}: the baseline disagrees with itself as often)")
    return f"; flips {a.flip_rate:.1%} of items vs A/A noise floor {a.noise_flip_rate:.1%}"


def _reason(a: TaskAnalysis, verdict: Verdict, p_adj: float, alpha: float, margin: float) -> str:
    level = ""
    if a.sequential is not None:  # reached its full item set undecided: the fixed tests ran
        level = (f" (sequential run: the fixed tests, interval and MDE are at level "
                 f"{final_alpha(alpha):g}, the interim looks spent the rest of "
                 f"alpha; p-values are scaled to compare with {alpha:g})")
    return _verdict_reason(a, verdict, p_adj, alpha, margin) + level + _noise(a)


def _verdict_reason(a: TaskAnalysis, verdict: Verdict, p_adj: float, alpha: float,
                    margin: float) -> str:
    flips = f"{a.correct_to_wrong} correct->wrong vs {a.wrong_to_correct} wrong->correct"
    if verdict is Verdict.REGRESSION:
        return (f"{a.metric} dropped {_points(a.delta)} ({flips}); {a.regression_test} "
                f"p={p_adj:.3g} after correction < alpha={alpha:g}")
    if verdict is Verdict.PASS:
        return (f"delta {_points(a.delta)}, interval [{_points(a.ci_low)}, {_points(a.ci_high)}] "
                f"lies above -{margin * 100:.1f} pts; non-inferior ({a.noninferiority_test} "
                f"p={a.noninferiority_pvalue:.3g})")
    mde = (f"the smallest drop these {a.n} items detect with 80% power is "
           f"{a.mde * 100:.1f} pts" if a.mde is not None else (a.mde_note or "no MDE"))
    return (f"no significant drop ({a.regression_test} p adj={p_adj:.3g}), but the interval "
            f"[{_points(a.ci_low)}, {_points(a.ci_high)}] reaches below the margin "
            f"-{margin * 100:.1f} pts; {mde}")


def _stopped(a: TaskAnalysis) -> bool:
    return a.sequential is not None and a.sequential.stopped_early


def _sequential_reason(a: TaskAnalysis, verdict: Verdict, p_adj: float, alpha: float,
                       margin: float) -> str:
    s = a.sequential
    assert s is not None
    flips = f"{a.correct_to_wrong} correct->wrong vs {a.wrong_to_correct} wrong->correct"
    where = (f"sequential test stopped after {s.items_used} of {s.n_items} items "
             f"({s.looks} look(s) of {s.chunk})")
    if verdict is Verdict.REGRESSION:
        return (f"{a.metric} dropped {_points(a.delta)} ({flips}); {where}: regression e-value "
                f"{np.exp(s.log_evalue_regression):.3g} >= 1/{s.alpha:.3g} "
                f"(p adj={p_adj:.3g} < alpha={alpha:g})")
    return (f"delta {_points(a.delta)} ({flips}); {where}: non-inferiority at "
            f"-{margin * 100:.1f} pts shown, e-value {np.exp(s.log_evalue_noninferiority):.3g} "
            f">= 1/{s.alpha:.3g}")


def decide(analyses: list[TaskAnalysis], *, alpha: float, margin: float,
           correction: str = "holm", pooled: bool = False,
           study_adjusted: dict[str, float] | None = None) -> RunVerdict:
    """`pooled`: the stratified McNemar test over the gated binary tasks joins the Holm
    family of the per-task tests (k + 1 hypotheses, family-wise level alpha), and its
    rejection is a REGRESSION of the run. Without it, it is reported only.

    `study_adjusted`: the gated tasks' regression p-values already adjusted in a larger
    family (a study: Holm over every arm and task, `study_family`); used instead of this
    run's own correction. Not with `pooled` or a sequential run."""
    gated = [a for a in analyses if a.gated]
    sequential_run = any(a.sequential is not None for a in analyses)
    # a sequential run spends SEQUENTIAL_SHARE of alpha on its looks (Bonferroni over the
    # gated tasks); the fixed-sample tests get the rest, so their p-values are scaled
    fixed_scale = 1 / final_alpha(1.0) if sequential_run else 1.0
    look_scale = 1 / look_alpha(1.0, len(gated)) if gated else 1.0
    full = [a for a in gated if not _stopped(a)]
    pvalues = np.array([a.regression_pvalue for a in full], dtype=float)
    pool = [a for a in gated if a.binary]
    pooled_test = stats.pooled_mcnemar([stats.FlipCounts(
        n=a.n, both_correct=0, both_wrong=0, correct_to_wrong=a.correct_to_wrong,
        wrong_to_correct=a.wrong_to_correct) for a in pool]) \
        if len(pool) > 1 and not sequential_run else None
    gates_pooled = pooled and pooled_test is not None
    family = np.append(pvalues, pooled_test.pvalue) if gates_pooled else pvalues
    if study_adjusted is not None:
        if gates_pooled or sequential_run:
            raise ValueError("study_adjusted p-values cannot be combined with a gating pooled "
                             "test or a sequential run")
        family_adjusted = np.array([study_adjusted[a.task] for a in full], dtype=float)
    elif correction == "holm" and len(family) > 1:
        family_adjusted = stats.holm(family, alpha=alpha).pvalues_adjusted
    else:
        family_adjusted = family
    adjusted = family_adjusted[:len(full)]
    pooled_verdict = None
    if pooled_test is not None:
        p_pooled = float(family_adjusted[-1]) if gates_pooled else pooled_test.pvalue
        pooled_verdict = PooledVerdict(
            tasks=tuple(a.task for a in pool), correct_to_wrong=pooled_test.statistic,
            wrong_to_correct=pooled_test.discordant - pooled_test.statistic,
            pvalue=pooled_test.pvalue, pvalue_adjusted=p_pooled, gates=gates_pooled,
            significant=p_pooled < alpha)
    adjusted_by_task = {a.task: min(1.0, float(p) * fixed_scale) for a, p in zip(full, adjusted)}
    adjusted_by_task.update({a.task: min(1.0, a.sequential.pvalue_regression * look_scale)
                             for a in gated if _stopped(a)})
    # tasks that do not gate are screened: Benjamini-Hochberg controls the false discovery
    # rate among the regressions they report, without the family-wise strictness of Holm
    screened = [a for a in analyses if not a.gated]
    if len(screened) > 1:
        bh = stats.benjamini_hochberg([a.regression_pvalue for a in screened], alpha=alpha)
        adjusted_by_task.update({a.task: float(p) for a, p in zip(screened, bh.pvalues_adjusted)})
    task_verdicts = []
    for a in analyses:
        p_adj = adjusted_by_task.get(a.task, a.regression_pvalue)
        if _stopped(a) and a.gated:
            verdict = Verdict.REGRESSION if a.sequential.decision == "regression" else Verdict.PASS
            task_verdicts.append(TaskVerdict(a.task, a.gated, verdict, p_adj, _sequential_reason(
                a, verdict, p_adj, alpha, margin) + _noise(a)))
            continue
        if p_adj < alpha:
            verdict = Verdict.REGRESSION
        elif a.noninferiority_pvalue * fixed_scale < alpha:
            verdict = Verdict.PASS
        else:
            verdict = Verdict.INCONCLUSIVE
        task_verdicts.append(TaskVerdict(a.task, a.gated, verdict, p_adj,
                                         _reason(a, verdict, p_adj, alpha, margin)))
    gated_verdicts = [t for t in task_verdicts if t.gated]
    if not gated_verdicts:
        overall, reason = Verdict.INCONCLUSIVE, "no task is gated"
    elif any(t.verdict is Verdict.REGRESSION for t in gated_verdicts):
        names = [t.task for t in gated_verdicts if t.verdict is Verdict.REGRESSION]
        overall, reason = Verdict.REGRESSION, f"regression in {', '.join(names)}"
    elif pooled_verdict is not None and pooled_verdict.gates and pooled_verdict.significant:
        overall, reason = Verdict.REGRESSION, (
            f"pooled regression over {len(pooled_verdict.tasks)} gated tasks: "
            f"{pooled_verdict.correct_to_wrong} correct->wrong vs "
            f"{pooled_verdict.wrong_to_correct} wrong->correct, exact stratified McNemar "
            f"p adj={pooled_verdict.pvalue_adjusted:.3g} < alpha={alpha:g} (no single task "
            "shows it)")
    elif any(t.verdict is Verdict.INCONCLUSIVE for t in gated_verdicts):
        names = [t.task for t in gated_verdicts if t.verdict is Verdict.INCONCLUSIVE]
        overall, reason = Verdict.INCONCLUSIVE, f"cannot show non-inferiority for {', '.join(names)}"
    else:
        overall, reason = Verdict.PASS, "every gated task is non-inferior at the margin"
    return RunVerdict(overall, tuple(task_verdicts), alpha, margin, correction, reason,
                      pooled_verdict)


def study_family(pvalues: dict[tuple[str, str], float], *, alpha: float,
                 correction: str = "holm") -> dict[tuple[str, str], float]:
    """Holm over every gated (arm, task) regression p-value of a study: the family-wise
    false-alarm rate over all its comparisons stays alpha. `correction: none` leaves them."""
    keys = list(pvalues)
    if correction != "holm" or len(keys) < 2:
        return dict(pvalues)
    adjusted = stats.holm([pvalues[k] for k in keys], alpha=alpha).pvalues_adjusted
    return {k: float(p) for k, p in zip(keys, adjusted)}


def apply_speed_gate(verdict: RunVerdict, speed) -> RunVerdict:
    """A config's `min_speedup`: a missed minimum fails the run (exit 1, like a regression);
    an interval that straddles it turns a PASS into INCONCLUSIVE."""
    if speed is None or speed.gate in (None, "met"):
        return verdict
    shown = (describe_speedup(speed.tpot_speedup, speed.ci_low, speed.ci_high, speed.confidence)
             if speed.tpot_speedup is not None else "no speedup measured")
    if speed.gate_low is not None and speed.gate_high is not None:
        shown += (f", {speed.gate_low:.2f}-{speed.gate_high:.2f}x widened by the baseline "
                  "rerun's own speed difference")
    elif speed.tpot_speedup is not None:
        shown += " (no baseline rerun to size two engine starts' difference)"
    required = f"gate.min_speedup: {describe_requirement(speed.min_speedup)}"
    if speed.gate == "missed":
        return replace(verdict, verdict=Verdict.REGRESSION,
                       reason=f"{verdict.reason}; {shown}, below {required}")
    if verdict.verdict is Verdict.PASS:
        return replace(verdict, verdict=Verdict.INCONCLUSIVE,
                       reason=f"{verdict.reason}, but {shown} cannot show {required}")
    return verdict


def apply_exercise_gate(verdict: RunVerdict, report: ExerciseReport | None) -> RunVerdict:
    """A declared optimization that never engaged cannot PASS: INCONCLUSIVE, "not exercised".
    A REGRESSION stays one (the candidate did lose accuracy, whatever caused it)."""
    if report is None or not report.not_exercised or verdict.verdict is Verdict.REGRESSION:
        return verdict
    names = " and ".join(report.not_exercised)
    return replace(verdict, verdict=Verdict.INCONCLUSIVE,
                   reason=f"not exercised: {names} never engaged on a gated task, so this run "
                          f"cannot show it is safe (was: {verdict.reason})")


def apply_answer_gate(verdict: RunVerdict, changed: list[tuple[str, float]]) -> RunVerdict:
    """`gate.answer_distribution: fail`: a PASS or INCONCLUSIVE run whose sampled answers
    come from another distribution on a gated task (evals.analyse.repeats_analysis) is a
    REGRESSION (exit 1). A changed distribution is evidence of a difference in itself: that
    the rate test could not also show non-inferiority (too few items for the margin) does
    not make it less so. A REGRESSION stays one."""
    if not changed or verdict.verdict not in (Verdict.PASS, Verdict.INCONCLUSIVE):
        return verdict
    shown = ", ".join(f"{task} (Holm p={p:.2g})" for task, p in changed)
    return replace(verdict, verdict=Verdict.REGRESSION,
                   reason=f"{verdict.reason}, but the arms sample different answers on "
                          f"{shown} (gate.answer_distribution: fail)")


def apply_shift_gate(verdict: RunVerdict, shifted: list[tuple[str, float]]) -> RunVerdict:
    """`gate.logprob: fail`: a PASS whose token distributions shifted beyond the A/A noise
    floor on a gated task (evals.analyse.shift) is a REGRESSION (exit 1)."""
    if not shifted or verdict.verdict is not Verdict.PASS:
        return verdict
    shown = ", ".join(f"{task} (Holm p={p:.2g})" for task, p in shifted)
    return replace(verdict, verdict=Verdict.REGRESSION,
                   reason=f"{verdict.reason}, but the token distributions shifted beyond the "
                          f"A/A noise floor on {shown} (gate.logprob: fail)")
