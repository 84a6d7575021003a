"""`python -m evals ab CONFIG`: both arms of a config run (or are reused from the run store)
and are compared: plan -> preflight -> run -> finish (pair -> analyse -> decide -> record
-> report). After the plan, every step takes the plan (evals.plan.run_plan.RunPlan), not
the config. The run store records the run last."""

from __future__ import annotations

from pathlib import Path

from evals.analyse.comparison_analysis import WARM
from evals.analyse.early_stop import Looks
from evals.analyse.exercise import assess_plan
from evals.analyse.load_curve import load_curve_of
from evals.errors import ExitCode
from evals.pair.logprobs import read_arm_logprobs
from evals.pair.repeats import read_arm_repeats
from evals.pair.samples import read_output_dir
from evals.paths import ARMS, REPORTS_DIR
from evals.pipelines.finish import RunEvidence, finish
from evals.pipelines.run import RunResult, run_plan
from evals.plan.config import ABConfig
from evals.plan.executor import LOCAL, Executor
from evals.plan.run_plan import RunPlan, make_plan
from evals.preflight.checks import preflight
from evals.dispatch.arms import arm_specs, run_id_for, speed_records
from evals.store import open_store, record_in_store


def run_ab(config: ABConfig, reports_dir: Path = REPORTS_DIR, fresh: bool = False,
           echo=print, store_root: Path | None = None,
           allow_undeclared: bool = False, executor: Executor = LOCAL) -> tuple[ExitCode, Path]:
    """Plan -> preflight -> run -> finish; the exit code (the verdict's) and the run folder.
    `fresh`: finished tasks run again instead of being reused; `allow_undeclared`: the config
    audit warns instead of stopping; `executor`: where the arms run."""
    plan = plan_ab(config, reports_dir, executor=executor, allow_undeclared=allow_undeclared)
    checks = preflight(plan, echo=echo)
    store = open_store(reports_dir, store_root)
    looks = Looks(plan) if plan.looks else None
    ran = run_plan(plan, store, fresh=fresh, echo=echo,
                   answers={"candidate": looks} if looks else None)
    record = finish(kind="ab", run_dir=plan.run_dir, tasks=list(plan.tasks), gate=plan.gate,
                    seed=plan.seed, config_dump=plan.config_dump,
                    samples=_arm_samples(plan, ran), manifests=ran.manifests, echo=echo,
                    evidence=_evidence(plan, ran, checks, looks))
    record_in_store(store, plan.run_dir, kind="ab", deployment=plan.deployment, echo=echo)
    return ExitCode(record.exit_code), plan.run_dir


def plan_ab(config: ABConfig, reports_dir: Path = REPORTS_DIR, *, executor: Executor = LOCAL,
            allow_undeclared: bool = False) -> RunPlan:
    """The run's plan: its id (a hash of the config), its folder under `reports_dir`, each
    arm's spec."""
    run_id = run_id_for(config)
    run_dir = Path(reports_dir) / run_id
    return make_plan(config, run_id, run_dir, arm_specs(config, run_dir), executor=executor,
                     allow_undeclared=allow_undeclared)


def _arm_samples(plan: RunPlan, ran: RunResult) -> dict:
    tasks = plan.task_names
    samples = {name: read_output_dir(layout.lm_eval_dir, tasks)
               for name, layout in ran.layouts.items()}
    for name in ARMS:
        if name in plan.specs and plan.specs[name].cache_stress:
            samples[name + WARM] = read_output_dir(
                ran.layouts[name].warm_layout().lm_eval_dir, tasks)
    return samples


def _evidence(plan: RunPlan, ran: RunResult, checks: dict, looks: Looks | None) -> RunEvidence:
    """What the run found besides the items: preflight's findings with the audit's, the
    sequential looks, speed, log-probabilities, repeats, the exercise check, the load curve."""
    tasks = plan.task_names
    sequential = None
    if plan.looks and looks is not None:
        sequential = {"chunk": plan.looks.chunk, "alpha": plan.looks.alpha,
                      "n_items": {t: ran.manifests["candidate"]["tasks"][t]["n_items"]
                                  for t in tasks},
                      "looks": looks.last}
    return RunEvidence(
        sequential=sequential, speed=speed_records(ran.layouts, plan.specs),
        preflight={**checks, "audit": ran.audit.audit,
                   "warnings": checks["warnings"] + list(ran.audit.warnings)},
        logprobs={name: read_arm_logprobs(layout.root, tasks)
                  for name, layout in ran.layouts.items()},
        repeats={name: read_arm_repeats(layout.root, tasks)
                 for name, layout in ran.layouts.items()},
        exercise=assess_plan(plan, ran.manifests),
        load_curve=load_curve_of(plan, {name: ran.layouts[name].root for name in ARMS}))
