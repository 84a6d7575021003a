"""The study pipeline (evals.plan.study): N arms, each compared with the baseline.

plan -> preflight (each comparison's checks, the arms pairwise distinct, one audit that
resolves every arm) -> run (each arm once; a failed arm fails only its comparisons) ->
pair and analyse (each comparison) -> decide (one Holm family over every gated arm x task,
then each comparison's own gates: speed, exercise) -> record (each comparison as an
ordinary run under `comparisons/<arm>/`, with its report, markdown and JUnit; `study.json`)
-> report (`study.html`: the arms x tasks matrix and, for factorial designs, the
interaction of each pair of factors on each task).

The study's verdict: REGRESSION if any arm regresses, else INCONCLUSIVE if any arm is, else
PASS; a failed arm makes the run's exit code 4 (a rerun resumes it).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from evals.analyse.exercise import assess, declared_optimizations
from evals.analyse.interaction import task_interaction
from evals.comparison import (DEFAULT_REPORTS, LOCAL, Analysed, Executor, RunEvidence, finish,
                              pair_and_analyse)
from evals.decide.verdict import Verdict, study_family
from evals.errors import ExitCode, UserError
from evals.paths import STUDY_FILE, STUDY_PAGE
from evals.pair.samples import read_output_dir
from evals.plan.config import check_local_models
from evals.plan.study import Study
from evals.preflight.cpu_support import check_cpu_support
from evals.record.platform_record import run_platform
from evals.preflight.checks import (IDENTITY, AuditOutcome, AuditWhileStarting, arm_identity,
                                    resolved_or_recorded,
                                    check_effective_configs, check_fault_support, check_inputs,
                                    doctor_checks, with_resolved_configs)
from evals.preflight.audit import audit_resolved
from evals.record.records import STUDY
from evals.record.run_record_model import TaskRecord
from evals.record.study_record import StudyComparison, StudyGate, StudyRecord
from evals.store import open_store, record_in_store
from evals.run.arms import arm_specs, manifests_of, fresh_or_reused, speed_records
from evals.run.ray_executor import submit_arms
from evals.run.concurrent import device_plan, run_side_by_side
from evals.runner.layout import ArmLayout

COMPARISONS = "comparisons"


def study_specs(study: Study, run_dir: Path) -> dict:
    """Every arm's spec, the baseline first; each arm runs once, into `arms/<arm>/`."""
    specs = {}
    for arm, comparison in study.comparisons.items():
        pair = arm_specs(comparison, run_dir)
        if not specs:
            specs[study.baseline] = replace(pair["baseline"], arm=study.baseline,
                                            output_dir=str(run_dir / "arms" / study.baseline))
        specs[arm] = replace(pair["candidate"], arm=arm, output_dir=str(run_dir / "arms" / arm))
    return specs


def check_study_arms_differ(study: Study, specs: dict) -> None:
    """Two arms with the same identity (evals.preflight.checks.arm_identity) would measure
    the same thing twice: named before any engine starts."""
    seen: dict = {}
    for arm, spec in specs.items():
        identity = arm_identity(spec)
        if identity in seen:
            raise UserError(f"{study.source}: arms `{seen[identity]}` and `{arm}` are identical "
                            f"(same {IDENTITY}); a study's arms must differ.")
        seen[identity] = arm


@dataclass(frozen=True)
class StudyAudit:
    """Each comparison's audit outcome, and every arm's effective engine config."""

    comparisons: dict[str, AuditOutcome]
    resolved: dict


def study_audit(study: Study, specs: dict, *, allow_undeclared: bool, echo) -> StudyAudit:
    """Every arm's effective engine config, resolved once (arms sharing an environment in one
    process), then each comparison audited as a two-arm config; arms that vLLM resolves to
    the same effective config are a stop."""
    resolved = resolved_or_recorded(specs)
    effective: dict = {}
    for arm, r in resolved.items():
        if r.effective is None:
            continue
        key = arm_identity(specs[arm], r.effective)
        if key in effective:
            raise UserError(f"{study.source}: vLLM resolves arms `{effective[key]}` and `{arm}` "
                            "to the same effective engine config; they would measure the same "
                            "thing twice.")
        effective[key] = arm
    per_arm = {}
    for arm, comparison in study.comparisons.items():
        pair = {"baseline": resolved[study.baseline], "candidate": resolved[arm]}
        audit = audit_resolved(comparison, pair, allow_undeclared=allow_undeclared)
        echo(f"[evals] {study.baseline} vs {arm}: " + audit.message())
        audit.check()
        per_arm[arm] = AuditOutcome(audit=audit.to_dict(), warnings=tuple(audit.warning_lines()),
                                    resolved={role: r.effective for role, r in pair.items()})
    return StudyAudit(per_arm, {arm: r.effective for arm, r in resolved.items()})


def _run_study_arms(study: Study, specs: dict, echo, audit: AuditWhileStarting,
                    executor: Executor):
    """Each arm once, side by side where the devices allow (evals.run.concurrent) or as Ray
    tasks. A failed arm is recorded and the others go on; the audit's stop is raised when the
    first arm ends, before any other arm starts (with `--parallel 1`), or, on Ray, before
    any arm is submitted."""
    if executor.ray:
        audit.join()
        try:
            dirs, failed, where = submit_arms(specs, address=executor.address,
                                              parallel=executor.parallel, echo=echo,
                                              shard_tasks=executor.shard_tasks)
        except UserError as exc:
            raise UserError(f"{study.source}: {exc}") from None
        layouts = {name: ArmLayout(path) for name, path in dirs.items()}
        return layouts, manifests_of(layouts, specs), failed, where
    plan = device_plan(specs, executor.parallel, study.source, executor.arms_per_gpu)
    if plan.parallel > 1:
        sharing = f" ({plan.arms_per_gpu} arms per GPU)" if plan.arms_per_gpu > 1 else ""
        echo(f"[evals] up to {plan.parallel} arms at once on {plan.kind.upper()} devices "
             f"{','.join(map(str, plan.pool))}{sharing}")
    try:
        layouts, failed, devices = run_side_by_side(plan, specs, echo, audit.answerer(None),
                                                    audit.join)
    except UserError as exc:
        raise UserError(exc if str(exc).startswith(study.source) else
                        f"{study.source}: {exc}") from None
    return layouts, manifests_of(layouts, specs), failed, devices


def run_study(study: Study, reports_dir: Path = DEFAULT_REPORTS, fresh: bool = False,
              echo=print, store_root: Path | None = None, allow_undeclared: bool = False,
              executor: Executor = LOCAL) -> tuple[ExitCode, Path]:
    """`executor.parallel`: most arms running at once (None: as many as the GPUs fit; one at
    a time on a CPU machine); `executor.arms_per_gpu`: one-GPU arms sharing each GPU;
    `executor.ray`: the arms as Ray tasks."""
    settings = study.settings
    # plan and preflight (what this CPU cannot run is named by the study's arm names)
    for arm, comparison in study.comparisons.items():
        check_local_models(comparison)
        check_cpu_support(comparison, names={"baseline": f"arm {study.baseline}",
                                             "candidate": f"arm {arm}"})
    check_inputs(settings, devices=False)  # the device plan checks every arm by name
    executor.check()
    for comparison in study.comparisons.values():
        check_fault_support(comparison)
    run_dir = Path(reports_dir) / study.run_id()
    specs = study_specs(study, run_dir)
    check_study_arms_differ(study, specs)
    checks = {arm: doctor_checks(c, echo=lambda line, arm=arm: echo(f"[{arm}] {line}"))
              for arm, c in study.comparisons.items()}
    store = open_store(reports_dir, store_root)
    fresh_or_reused(specs, store, fresh, echo)
    # run: each arm once; the audit resolves every arm while the first engine starts
    tasks = [t.name for t in settings.tasks]
    echo(f"[evals] study {run_dir.name}: {len(specs)} arms ({', '.join(specs)}), "
         f"{len(tasks)} task(s); each arm vs {study.baseline}")
    started = time.time()
    audit = AuditWhileStarting(lambda: study_audit(study, specs, allow_undeclared=allow_undeclared,
                                                   echo=echo))
    layouts, manifests, failed, devices = _run_study_arms(study, specs, echo, audit, executor)
    outcome = audit.join()
    manifests = with_resolved_configs(manifests, outcome.resolved)
    echo(f"[evals] arms finished in {time.time() - started:.0f} s; analysing")
    # pair and analyse each comparison whose two arms ran
    ran = [arm for arm in study.candidates if arm not in failed and study.baseline not in failed]
    samples = {arm: read_output_dir(layouts[arm].lm_eval_dir, tasks)
               for arm in layouts}
    analysed: dict[str, Analysed] = {}
    for arm in ran:
        comparison = study.comparisons[arm]
        check_effective_configs(comparison, {"baseline": manifests[study.baseline],
                                             "candidate": manifests[arm]},
                                {"baseline": specs[study.baseline], "candidate": specs[arm]})
        analysed[arm] = pair_and_analyse(
            _comparison_dir(run_dir, arm), list(comparison.tasks), comparison.gate,
            comparison.seed, {"baseline": samples[study.baseline], "candidate": samples[arm]})
    # decide: one Holm family over every gated (arm, task), then each comparison's gates
    family = study_family({(arm, a.task): a.regression_pvalue for arm in ran
                           for a in analysed[arm].analyses if a.gated},
                          alpha=settings.gate.alpha, correction=settings.gate.correction)
    comparisons: dict[str, StudyComparison] = {}
    for arm in ran:
        comparisons[arm] = _finish_comparison(study, arm, run_dir, specs, layouts, manifests,
                                              samples, analysed[arm], checks[arm], outcome,
                                              {task: p for (a, task), p in family.items()
                                               if a == arm}, store, echo)
    for arm in study.candidates:
        if arm not in comparisons:
            why = failed.get(arm) or failed.get(study.baseline) or "not run"
            comparisons[arm] = StudyComparison(
                arm=arm, verdict="FAILED", exit_code=int(ExitCode.RUN_FAILED),
                reason=f"arm {arm if arm in failed else study.baseline} failed: "
                       f"{why.splitlines()[0] if why else ''}")
    interactions = _interactions(study, analysed, comparisons, settings.gate.alpha)
    record = _study_record(study, run_dir, comparisons, interactions, failed, manifests,
                           time.time() - started, devices)
    STUDY.write(run_dir / STUDY_FILE, record.model_dump())
    from evals.report.study import render_study_table, write_study_page  # rendering is last
    page = write_study_page(record, run_dir / STUDY_PAGE)
    echo(render_study_table(record))
    for item in interactions:
        echo(item["sentence"])
    echo(f"study report: {page}")
    return ExitCode(record.exit_code), run_dir


def _comparison_dir(run_dir: Path, arm: str) -> Path:
    return run_dir / COMPARISONS / arm


def _finish_comparison(study, arm, run_dir, specs, layouts, manifests, samples, analysed,
                       checks, outcome, adjusted, store, echo) -> StudyComparison:
    """Decide, record and report one arm's comparison with the baseline, like an `ab` run."""
    comparison = study.comparisons[arm]
    pair = {"baseline": study.baseline, "candidate": arm}
    # output_dir: the store indexes each arm task under the arm's real directory (a study's
    # arms live under <study>/arms/, not under the comparison), so a later run reuses them
    pair_manifests = {role: {**manifests[name], "arm_name": name,
                             "output_dir": specs[name].output_dir}
                      for role, name in pair.items()}
    evidence = RunEvidence(
        speed=speed_records({r: layouts[n] for r, n in pair.items()},
                            {r: specs[n] for r, n in pair.items()}),
        preflight={**checks, "audit": outcome.comparisons[arm].audit,
                   "warnings": checks["warnings"] + list(outcome.comparisons[arm].warnings)},
        exercise=assess(declared_optimizations(comparison.arm("baseline").engine,
                                               comparison.arm("candidate").engine),
                        pair_manifests, {t.name: t.gate for t in comparison.tasks}))
    comp_dir = _comparison_dir(run_dir, arm)
    run_id = f"{run_dir.name}.{arm}"
    echo(f"[evals] {arm} vs {study.baseline}:")
    summary = finish(kind="ab", run_dir=comp_dir, run_id=run_id, tasks=list(comparison.tasks),
                     gate=comparison.gate, seed=comparison.seed,
                     config_dump=json.loads(comparison.model_dump_json()),
                     samples={r: samples[n] for r, n in pair.items()}, manifests=pair_manifests,
                     echo=echo, evidence=evidence, analysed=analysed, study_adjusted=adjusted)
    record_in_store(store, comp_dir, kind="ab", deployment=f"{study.name}.{arm}", echo=echo)
    return StudyComparison(
        arm=arm, run_id=run_id, dir=f"{COMPARISONS}/{arm}", verdict=summary.verdict,
        exit_code=summary.exit_code, reason=summary.reason,
        tasks=[TaskRecord(**{k: getattr(t, k) for k in _STUDY_TASK_FIELDS})
               for t in summary.tasks],
        speed=_speed_line(summary.speed))


# what study.json keeps of each comparison's task results
_STUDY_TASK_FIELDS = ("task", "metric", "gated", "verdict", "delta", "ci_low", "ci_high",
                      "regression_pvalue", "regression_pvalue_adjusted", "correct_to_wrong",
                      "wrong_to_correct", "n", "mde", "baseline_mean", "candidate_mean")


def _speed_line(speed: dict | None) -> dict | None:
    if not speed or speed.get("tpot_speedup") is None:
        return None
    return {k: speed.get(k) for k in ("tpot_speedup", "ci_low", "ci_high")}


def _interactions(study: Study, analysed: dict[str, Analysed],
                  comparisons: dict[str, StudyComparison], alpha: float) -> list[dict]:
    out = []
    for cell in study.cells():
        roles = {"first_only": cell.first_only, "second_only": cell.second_only,
                 "both": cell.both}
        if not all(arm in analysed for arm in roles.values()):
            continue
        for task in [t.name for t in study.settings.tasks]:
            pairs = {role: next(p for p in analysed[arm].paired if p.task == task)
                     for role, arm in roles.items()}
            verdicts = {arm: next((t.verdict for t in comparisons[arm].tasks
                                   if t.task == task), None) for arm in roles.values()}
            result = task_interaction(cell, pairs, alpha=alpha, verdicts=verdicts)
            out.append(asdict(result))
    return out


def _study_record(study: Study, run_dir: Path, comparisons: dict[str, StudyComparison],
                  interactions: list, failed: dict, manifests: dict, seconds: float,
                  devices: dict) -> StudyRecord:
    verdicts = [c.verdict for c in comparisons.values()]
    if any(v == "REGRESSION" for v in verdicts):
        verdict = "REGRESSION"
    elif any(v in ("INCONCLUSIVE", "FAILED") for v in verdicts):
        verdict = "INCONCLUSIVE"
    else:
        verdict = "PASS"
    regressed = [a for a, c in comparisons.items() if c.verdict == "REGRESSION"]
    if failed:
        code = ExitCode.RUN_FAILED
        reason = f"arm(s) {', '.join(failed)} failed; rerun the same command to resume"
    else:
        code = Verdict(verdict).exit_code
        reason = (f"regression in {', '.join(regressed)}" if regressed else
                  "every arm is non-inferior on every gated task" if verdict == "PASS" else
                  "cannot show non-inferiority for " + ", ".join(
                      a for a, c in comparisons.items() if c.verdict == "INCONCLUSIVE"))
    settings = study.settings
    return StudyRecord(
        kind="study", run_id=run_dir.name, name=study.name, config=study.source,
        baseline=study.baseline, arms=list(study.arms),
        factors={f: list(levels) for f, levels in study.factors.items()},
        levels=study.levels, tasks=[t.name for t in settings.tasks],
        gate=StudyGate(alpha=settings.gate.alpha, margin=settings.gate.margin,
                       correction=settings.gate.correction,
                       family="Holm over every gated (arm, task) comparison with the baseline"),
        verdict=verdict, exit_code=int(code), reason=reason,
        comparisons=[comparisons[a] for a in study.candidates],
        interactions=interactions, failed=failed,
        engines={a: m.get("effective_engine_config") for a, m in manifests.items()},
        versions=next((m.get("versions") for m in manifests.values() if m.get("versions")),
                      None),
        platform=run_platform("study", manifests), wall_seconds=round(seconds, 1),
        devices=devices)
