"""`python -m evals ab STUDY_CONFIG`: the study pipeline (evals.plan.study): N arms, each
compared with the baseline.

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
from pathlib import Path

from evals.analyse.comparison_analysis import Analysed, pair_and_analyse
from evals.analyse.exercise import assess_config
from evals.analyse.interaction import study_interactions
from evals.decide.verdict import study_family
from evals.errors import ExitCode
from evals.pair.repeats import read_arm_repeats
from evals.pair.samples import read_output_dir
from evals.paths import REPORTS_DIR, STUDY_FILE, STUDY_PAGE
from evals.pipelines.finish import RunEvidence, finish
from evals.pipelines.run import run_with_audit
from evals.plan.config import check_local_models
from evals.plan.executor import LOCAL, Executor
from evals.plan.study import Study
from evals.preflight.checks import check_fault_support, check_inputs, doctor_checks
from evals.preflight.cpu_support import check_cpu_support
from evals.preflight.study_checks import check_study_arms_differ
from evals.schemas import STUDY
from evals.record.study_record import StudyComparison, build_study_record, comparison_entry
from evals.dispatch.arms import speed_records, study_specs
from evals.dispatch.config_audit import check_effective_configs, study_audit
from evals.dispatch.executor import check_executor
from evals.dispatch.study_arms import run_study_arms
from evals.store import open_store, record_in_store

COMPARISONS = "comparisons"


def run_study(study: Study, reports_dir: Path = REPORTS_DIR, fresh: bool = False,
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
    check_executor(executor)
    for comparison in study.comparisons.values():
        check_fault_support(comparison)
    run_dir = Path(reports_dir) / study.run_id()
    specs = study_specs(study, run_dir)
    check_study_arms_differ(study, specs)
    checks = {arm: doctor_checks(c, echo=lambda line, arm=arm: echo(f"[{arm}] {line}"))
              for arm, c in study.comparisons.items()}
    store = open_store(reports_dir, store_root)
    tasks = [t.name for t in settings.tasks]
    started = time.time()
    # run: each arm once; the audit resolves every arm while the first engine starts
    arms_run = run_with_audit(
        specs, store, fresh=fresh, echo=echo,
        banner=(f"[evals] study {run_dir.name}: {len(specs)} arms ({', '.join(specs)}), "
                f"{len(tasks)} task(s); each arm vs {study.baseline}"),
        audit=lambda _: study_audit(study, specs, allow_undeclared=allow_undeclared, echo=echo),
        run=lambda audit, _: run_study_arms(study, specs, echo, audit, executor))
    layouts, manifests, failed = arms_run.layouts, arms_run.manifests, arms_run.failed
    outcome = arms_run.audit
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
            comparison.seed, {"baseline": samples[study.baseline], "candidate": samples[arm]},
            manifests={"baseline": manifests[study.baseline], "candidate": manifests[arm]},
            repeats={"baseline": read_arm_repeats(layouts[study.baseline].root, tasks),
                     "candidate": read_arm_repeats(layouts[arm].root, tasks)})
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
    interactions = study_interactions(
        study, {arm: a.paired for arm, a in analysed.items()},
        {arm: {t.task: t.verdict for t in comparisons[arm].tasks} for arm in analysed},
        settings.gate.alpha)
    record = build_study_record(study, run_dir.name, comparisons, interactions, failed,
                                manifests, time.time() - started, arms_run.where)
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
        exercise=assess_config(comparison, pair_manifests))
    comp_dir = _comparison_dir(run_dir, arm)
    run_id = f"{run_dir.name}.{arm}"
    echo(f"[evals] {arm} vs {study.baseline}:")
    summary = finish(kind="ab", run_dir=comp_dir, run_id=run_id, tasks=list(comparison.tasks),
                     gate=comparison.gate, seed=comparison.seed,
                     config_dump=json.loads(comparison.model_dump_json()),
                     samples={r: samples[n] for r, n in pair.items()}, manifests=pair_manifests,
                     echo=echo, evidence=evidence, analysed=analysed, study_adjusted=adjusted)
    record_in_store(store, comp_dir, kind="ab", deployment=f"{study.name}.{arm}", echo=echo)
    return comparison_entry(arm, run_id, f"{COMPARISONS}/{arm}", summary)
