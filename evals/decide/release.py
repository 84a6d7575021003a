"""One release decision from many runs: GO, NO-GO or INCONCLUSIVE under a release policy
(evals.plan.release_policy).

Per benchmark, first the evidence: of the runs that hold the benchmark, those whose config
hash or deployment, candidate vLLM release, hardware class or exercise evidence differ from
the policy's do not count (MISMATCHED when no run is left), nor do runs older than
`max_age_days` (STALE); no run at all is MISSING. Of the runs that count, the newest is
used and the others are listed, never averaged. Then the decision, as a run's gate makes it
(evals.decide.verdict) but at the benchmark's own margin:

* REGRESSION - the one-sided regression test (exact McNemar for a binary task) rejects
  after Holm's correction over the blocking benchmarks that have evidence (Holm 1979; the
  union of their hypotheses needs it), Benjamini-Hochberg among the others;
* PASS - not a regression, and non-inferiority at the margin is shown: Tango's score test
  (Tango 1998) recomputed from the run's flip counts at the policy's margin, p < alpha,
  which is the same as the 1 - 2 alpha score interval lying above -margin; an
  intersection-union test over the benchmarks, so it needs no correction (Berger 1982).
  A task that is not binary (or clustered) keeps the interval its run computed, which holds
  only at the run's alpha;
* INCONCLUSIVE - neither.

The margin is the smaller of the absolute one and `relative_margin` x the baseline's mean,
so a benchmark at 5% baseline accuracy is judged on its relative drop too.

The release is NO-GO when a blocking benchmark is a REGRESSION or its evidence is MISSING,
STALE or MISMATCHED; else INCONCLUSIVE when one is INCONCLUSIVE; else GO. A benchmark of a
tier that does not block never changes the verdict: it is a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from evals import stats
from evals.errors import ExitCode
from evals.stats.intervals import interval_level
from evals.plan.release_policy import Benchmark, Evidence, ReleasePolicy


class ReleaseVerdict(str, Enum):
    GO = "GO"
    NO_GO = "NO-GO"
    INCONCLUSIVE = "INCONCLUSIVE"

    @property
    def exit_code(self) -> ExitCode:
        return {"GO": ExitCode.PASS, "NO-GO": ExitCode.REGRESSION,
                "INCONCLUSIVE": ExitCode.INCONCLUSIVE}[self.value]


class Status(str, Enum):
    PASS = "PASS"
    REGRESSION = "REGRESSION"
    INCONCLUSIVE = "INCONCLUSIVE"
    MISSING = "MISSING"
    STALE = "STALE"
    MISMATCHED = "MISMATCHED"


EVIDENCE_PROBLEMS = (Status.MISSING, Status.STALE, Status.MISMATCHED)


@dataclass(frozen=True, slots=True)
class TaskResult:
    """One task of one run, as the run recorded it (evals.record.run_record_model)."""

    task: str
    metric: str | None
    binary: bool
    clustered: bool
    n: int | None
    correct_to_wrong: int | None
    wrong_to_correct: int | None
    baseline_mean: float | None
    candidate_mean: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None
    regression_pvalue: float | None
    regression_test: str | None


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the evidence rules and the decision need of one finished run."""

    run_id: str
    created: datetime
    source: str
    """The run directory (or the store's copy of it)."""
    report: str | None
    """The run's report.html."""
    config_hash: str | None
    deployment: str | None
    vllm: str | None
    """The candidate arm's vLLM release."""
    hardware: str | None
    """The platform the arms ran on, in words."""
    not_exercised: tuple[str, ...] | None
    """Declared optimizations that never engaged; None: the run has no exercise evidence."""
    alpha: float
    tasks: tuple[TaskResult, ...]


@dataclass(frozen=True, slots=True)
class OtherRun:
    """A run that held the benchmark but was not used, and why."""

    run_id: str
    why: str


@dataclass(frozen=True, slots=True)
class BenchmarkDecision:
    benchmark: str
    tier: str
    blocking: bool
    status: Status
    margin: float | None
    """The margin the benchmark was judged at (accuracy units)."""
    margin_rule: str
    reason: str
    run_id: str | None = None
    source: str | None = None
    report: str | None = None
    created: str | None = None
    age_days: float | None = None
    metric: str | None = None
    n: int | None = None
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str | None = None
    regression_pvalue: float | None = None
    regression_test: str | None = None
    regression_pvalue_adjusted: float | None = None
    noninferiority_pvalue: float | None = None
    noninferiority_test: str | None = None
    other_runs: tuple[OtherRun, ...] = ()


@dataclass(frozen=True, slots=True)
class ReleaseDecision:
    verdict: ReleaseVerdict
    reason: str
    benchmarks: tuple[BenchmarkDecision, ...]
    warnings: tuple[str, ...]
    alpha: float
    correction: str
    blocking: tuple[str, ...]
    as_of: str

    @property
    def exit_code(self) -> ExitCode:
        return self.verdict.exit_code


def _pts(x: float) -> str:
    return f"{x * 100:.1f} pts"


def _signed(x: float) -> str:
    return f"{x * 100:+.1f} pts"


def mismatch(run: RunFacts, evidence: Evidence) -> str | None:
    """Why `run` is not evidence about what is shipped, or None."""
    if evidence.config_hash and run.config_hash != evidence.config_hash:
        return f"config hash {run.config_hash or 'unknown'}, not {evidence.config_hash}"
    if evidence.deployment and run.deployment != evidence.deployment:
        return f"deployment {run.deployment or 'unknown'}, not {evidence.deployment}"
    if evidence.vllm and not (run.vllm == evidence.vllm
                              or (run.vllm or "").startswith(evidence.vllm + ".")):
        return f"vLLM {run.vllm or 'not recorded'}, not {evidence.vllm}"
    if evidence.hardware and evidence.hardware.lower() not in (run.hardware or "").lower():
        return f"hardware {run.hardware or 'not recorded'}, not {evidence.hardware}"
    if evidence.exercised:
        if run.not_exercised is None:
            return "no exercise evidence (the run declared no optimization)"
        if run.not_exercised:
            return f"not exercised: {' and '.join(run.not_exercised)} never engaged"
    return None


def _age_days(run: RunFacts, as_of: datetime) -> float:
    return (as_of - run.created).total_seconds() / 86400.0


def _margin(policy: ReleasePolicy, benchmark: Benchmark, result: TaskResult | None
            ) -> tuple[float | None, str]:
    """The margin the benchmark is judged at, and how it came about."""
    rule = policy.margins(benchmark)
    parts, values = [], []
    if rule.margin is not None:
        values.append(rule.margin)
        parts.append(_pts(rule.margin))
    if rule.relative_margin is not None:
        base = None if result is None else result.baseline_mean
        if base is None:
            parts.append(f"{rule.relative_margin:.0%} of the baseline")
        else:
            values.append(rule.relative_margin * base)
            parts.append(f"{rule.relative_margin:.0%} of baseline {base:.3f} = "
                         f"{_pts(rule.relative_margin * base)}")
    if not values:
        return None, parts[0]
    return min(values), parts[0] if len(parts) == 1 else f"the smaller of {' and '.join(parts)}"


@dataclass(frozen=True, slots=True)
class _Tested:
    regression_pvalue: float | None
    regression_test: str | None
    noninferiority_pvalue: float | None
    noninferiority_test: str | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None
    interval_pass: bool | None
    """Non-binary tasks: the run's interval lies above -margin (None: not at our alpha)."""


def _test(result: TaskResult, margin: float, alpha: float, run_alpha: float) -> _Tested:
    if result.binary and not result.clustered and result.n and \
            result.correct_to_wrong is not None and result.wrong_to_correct is not None:
        counts = stats.FlipCounts(n=result.n, both_correct=0, both_wrong=0,
                                  correct_to_wrong=result.correct_to_wrong,
                                  wrong_to_correct=result.wrong_to_correct)
        tango = stats.tango_noninferiority_from_counts(counts, margin, alpha)
        interval = tango.confidence_interval(interval_level(alpha))
        return _Tested(stats.mcnemar_exact_from_counts(counts).pvalue,
                       "exact McNemar, one-sided", tango.pvalue,
                       f"Tango score test at margin {margin:.4g}", interval.low, interval.high,
                       f"Tango score interval ({interval_level(alpha):.0%})", None)
    same_level = abs(run_alpha - alpha) < 1e-12
    above = None if result.ci_low is None or not same_level else result.ci_low > -margin
    return _Tested(result.regression_pvalue, result.regression_test, None, None,
                   result.ci_low, result.ci_high, result.ci_method, above)


def _candidates(runs: list[RunFacts], benchmark: Benchmark) -> list[tuple[RunFacts, TaskResult]]:
    found = [(run, t) for run in runs for t in run.tasks
             if t.task == benchmark.task and (benchmark.metric is None
                                              or t.metric == benchmark.metric)]
    return sorted(found, key=lambda rt: (rt[0].created, rt[0].run_id), reverse=True)


def _evidence(policy: ReleasePolicy, tier: str, benchmark: Benchmark, runs: list[RunFacts],
              as_of: datetime) -> BenchmarkDecision | tuple[RunFacts, TaskResult, tuple]:
    """The run to judge the benchmark on (with the runs not used), or its evidence problem."""
    ev = policy.evidence
    blocking = tier in policy.blocking
    found = _candidates(runs, benchmark)
    why: dict[str, str] = {}
    usable = []
    for run, result in found:
        problem = mismatch(run, ev)
        age = _age_days(run, as_of)
        if problem:
            why[run.run_id] = f"mismatched: {problem}"
        elif ev.max_age_days is not None and age > ev.max_age_days:
            why[run.run_id] = f"stale: {age:.1f} days old (limit {ev.max_age_days:g})"
        else:
            usable.append((run, result))
    if usable:
        run, result = usable[0]
        others = tuple(OtherRun(r.run_id, why.get(r.run_id) or f"older than {run.run_id}")
                       for r, _ in found if r.run_id != run.run_id)
        return run, result, others
    margin, rule = _margin(policy, benchmark, None)
    if not found:
        return BenchmarkDecision(benchmark.name, tier, blocking, Status.MISSING, margin, rule,
                                 "no run holds this benchmark")
    stale = [(r, t) for r, t in found if why[r.run_id].startswith("stale")]
    status = Status.STALE if stale else Status.MISMATCHED
    run, result = (stale or found)[0]
    margin, rule = _margin(policy, benchmark, result)
    reason = (f"newest run {run.run_id} is {why[run.run_id]}" if len(found) == 1 else
              f"none of {len(found)} runs counts; the newest, {run.run_id}, is "
              f"{why[run.run_id]}")
    return BenchmarkDecision(
        benchmark.name, tier, blocking, status, margin, rule, reason, run_id=run.run_id,
        source=run.source, report=run.report, created=run.created.isoformat(),
        age_days=round(_age_days(run, as_of), 3), metric=result.metric,
        other_runs=tuple(OtherRun(r.run_id, why[r.run_id]) for r, _ in found
                         if r.run_id != run.run_id))


def _adjusted(pvalues: dict[str, float], method: str, alpha: float) -> dict[str, float]:
    keys = list(pvalues)
    if len(keys) < 2 or method == "none":
        return dict(pvalues)
    adjust = stats.holm if method == "holm" else stats.benjamini_hochberg
    return {k: float(p) for k, p in zip(keys, adjust([pvalues[k] for k in keys],
                                                     alpha=alpha).pvalues_adjusted)}


def _judged(d: dict, tested: _Tested, p_adj: float | None, alpha: float) -> tuple[Status, str]:
    margin = d["margin"]
    interval = (f"interval [{_signed(tested.ci_low)}, {_signed(tested.ci_high)}]"
                if tested.ci_low is not None and tested.ci_high is not None else "no interval")
    if p_adj is not None and p_adj < alpha:
        return Status.REGRESSION, (f"dropped {_signed(d['delta'] or 0.0)}; "
                                   f"{tested.regression_test} p adj={p_adj:.3g} < "
                                   f"alpha={alpha:g}; {interval}")
    if tested.noninferiority_pvalue is not None:
        if tested.noninferiority_pvalue < alpha:
            return Status.PASS, (f"{interval} lies above -{_pts(margin)}; non-inferior "
                                 f"({tested.noninferiority_test} p="
                                 f"{tested.noninferiority_pvalue:.3g})")
        return Status.INCONCLUSIVE, (f"no significant drop, but the {interval} reaches "
                                     f"below -{_pts(margin)}")
    if tested.interval_pass is None:
        return Status.INCONCLUSIVE, (f"a task that is not binary keeps its run's interval "
                                     f"({tested.ci_method or 'none'}), which is not at the "
                                     f"policy's alpha {alpha:g}; rerun at that alpha")
    if tested.interval_pass:
        return Status.PASS, f"the run's {interval} lies above -{_pts(margin)}"
    return Status.INCONCLUSIVE, (f"no significant drop, but the run's {interval} reaches "
                                 f"below -{_pts(margin)}")


def decide_release(policy: ReleasePolicy, runs: list[RunFacts], as_of: datetime
                   ) -> ReleaseDecision:
    """The release verdict of `policy` on `runs` as of `as_of` (timezone-aware)."""
    alpha = policy.alpha
    evidence = [(tier, b, _evidence(policy, tier, b, runs, as_of))
                for tier, b in policy.benchmarks()]
    pending: dict[str, tuple[dict, _Tested]] = {}
    for tier, b, found in evidence:
        if isinstance(found, BenchmarkDecision):
            continue
        run, result, others = found
        margin, rule = _margin(policy, b, result)
        d = dict(benchmark=b.name, tier=tier, blocking=tier in policy.blocking, margin=margin,
                 margin_rule=rule, run_id=run.run_id, source=run.source, report=run.report,
                 created=run.created.isoformat(), age_days=round(_age_days(run, as_of), 3),
                 metric=result.metric, n=result.n, baseline_mean=result.baseline_mean,
                 candidate_mean=result.candidate_mean, delta=result.delta, other_runs=others)
        tested = _test(result, margin, alpha, run.alpha) if margin and margin > 0 else None
        pending[b.name] = (d, tested)
    family = {k: t.regression_pvalue for k, (d, t) in pending.items()
              if t is not None and t.regression_pvalue is not None and d["blocking"]}
    screened = {k: t.regression_pvalue for k, (d, t) in pending.items()
                if t is not None and t.regression_pvalue is not None and not d["blocking"]}
    adjusted = _adjusted(family, policy.correction, alpha) | _adjusted(
        screened, "benjamini_hochberg", alpha)
    decisions = []
    for _, b, found in evidence:
        if isinstance(found, BenchmarkDecision):
            decisions.append(found)
            continue
        d, tested = pending[b.name]
        if tested is None:
            decisions.append(BenchmarkDecision(**d, status=Status.INCONCLUSIVE, reason=(
                f"no margin to judge at ({d['margin_rule']}; the baseline's mean is 0 or "
                "unknown)")))
            continue
        p_adj = adjusted.get(b.name)
        status, reason = _judged(d, tested, p_adj, alpha)
        decisions.append(BenchmarkDecision(
            **d, status=status, reason=reason, ci_low=tested.ci_low, ci_high=tested.ci_high,
            ci_method=tested.ci_method, regression_pvalue=tested.regression_pvalue,
            regression_test=tested.regression_test, regression_pvalue_adjusted=p_adj,
            noninferiority_pvalue=tested.noninferiority_pvalue,
            noninferiority_test=tested.noninferiority_test))
    verdict, reason = _verdict(decisions)
    warnings = tuple(f"{d.tier} benchmark {d.benchmark} (not blocking): {d.status.value}, "
                     f"{d.reason}" for d in decisions
                     if not d.blocking and d.status is not Status.PASS)
    if verdict is ReleaseVerdict.GO and warnings:
        reason += f", with {len(warnings)} warning(s) from tiers that do not block"
    return ReleaseDecision(verdict, reason, tuple(decisions), warnings, alpha,
                           policy.correction, tuple(policy.blocking), as_of.isoformat())


def _verdict(decisions: list[BenchmarkDecision]) -> tuple[ReleaseVerdict, str]:
    blocking = [d for d in decisions if d.blocking]

    def named(*statuses: Status) -> list[str]:
        return [d.benchmark for d in blocking if d.status in statuses]

    problems = []
    for status, words in ((Status.REGRESSION, "regression in"),
                          (Status.MISSING, "missing evidence for"),
                          (Status.STALE, "stale evidence for"),
                          (Status.MISMATCHED, "mismatched evidence for")):
        if named(status):
            problems.append(f"{words} {', '.join(named(status))}")
    if problems:
        return ReleaseVerdict.NO_GO, "; ".join(problems)
    if named(Status.INCONCLUSIVE):
        return ReleaseVerdict.INCONCLUSIVE, (f"cannot show non-inferiority for "
                                             f"{', '.join(named(Status.INCONCLUSIVE))}")
    return ReleaseVerdict.GO, (f"every blocking benchmark ({len(blocking)}) is non-inferior "
                               "at its margin")
