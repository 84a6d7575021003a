"""`python -m evals ab CONFIG`: both arms of a config run (or are reused from the run store)
and are compared: plan -> preflight -> run -> pair -> analyse -> decide -> record ->
report. The run store records the run last."""

from __future__ import annotations

import json
from pathlib import Path

from evals.analyse.comparison_analysis import WARM
from evals.analyse.early_stop import Looks
from evals.analyse.exercise import assess_config
from evals.analyse.load_curve import load_curve_of
from evals.decide.drift import deployment_name
from evals.errors import ExitCode, UserError
from evals.pair.logprobs import read_arm_logprobs
from evals.pair.repeats import read_arm_repeats
from evals.pair.samples import read_output_dir
from evals.paths import ARMS, REPORTS_DIR
from evals.pipelines.finish import RunEvidence, finish
from evals.pipelines.preflight_and_run import preflight_and_run
from evals.plan.config import ABConfig
from evals.plan.schedule import sequential_alpha
from evals.preflight.checks import (check_arms_differ, check_effective_configs, check_inputs,
                                    config_audit, doctor_checks)
from evals.dispatch.arms import arm_specs, run_arms, run_arms_on_ray, run_id_for, speed_records
from evals.dispatch.executor import LOCAL, Executor
from evals.runner.layout import ArmLayout
from evals.store import open_store, record_in_store


def _arm_samples(layouts: dict[str, ArmLayout], specs, tasks: list[str]) -> dict:
    samples = {name: read_output_dir(layouts[name].lm_eval_dir, tasks) for name in layouts}
    for name in ARMS:
        if name in specs and specs[name].cache_stress:
            samples[name + WARM] = read_output_dir(layouts[name].warm_layout().lm_eval_dir, tasks)
    return samples


def run_ab(config: ABConfig, reports_dir: Path = REPORTS_DIR, fresh: bool = False,
           echo=print, store_root: Path | None = None,
           allow_undeclared: bool = False, executor: Executor = LOCAL) -> tuple[ExitCode, Path]:
    # plan and preflight
    check_inputs(config, devices=not executor.ray)
    if executor.ray and config.sequential:
        raise UserError(f"{config.source}: `sequential` needs the local executor (the parent "
                        "answers each look of the running arm); drop `--executor ray`.")
    executor.check()
    run_dir = Path(reports_dir) / run_id_for(config)
    specs = arm_specs(config, run_dir)
    check_arms_differ(config, specs)
    checks = doctor_checks(config, echo=echo)
    store = open_store(reports_dir, store_root)
    looks = None
    if config.sequential:
        looks = Looks(config, ArmLayout(Path(specs["baseline"].output_dir)).lm_eval_dir,
                      ArmLayout(Path(specs["candidate"].output_dir)).lm_eval_dir)

    def run(audit, in_workers):
        if executor.ray:  # a Ray task cannot wait for the audit's go: the audit goes first
            audit.join()
            layouts, manifests, where = run_arms_on_ray(config, specs, echo, executor)
            echo(f"[evals] arms ran on Ray: {where['arms']}")
            return layouts, manifests, {}, where
        layouts, manifests = run_arms(config, specs, echo,
                                      {"candidate": looks} if looks else None, audit,
                                      in_workers)
        return layouts, manifests, {}, {}

    # run: the audit resolves both arms while the first engine starts; locally the arms'
    # own workers resolve their configs for it (no vLLM import of its own), a Ray task
    # cannot answer, so there the audit's resolver processes do
    ran = preflight_and_run(
        specs, store, fresh=fresh, echo=echo, run=run, resolve_in_workers=not executor.ray,
        banner=f"[evals] run {run_dir.name}: {len(config.tasks)} task(s), arms run one at a time",
        audit=lambda in_workers: config_audit(config, specs, allow_undeclared=allow_undeclared,
                                              echo=echo, in_workers=in_workers))
    checks = {**checks, "audit": ran.audit.audit,
              "warnings": checks["warnings"] + list(ran.audit.warnings)}
    check_effective_configs(config, ran.manifests, specs)
    tasks = [t.name for t in config.tasks]
    sequential = None
    if config.sequential:
        sequential = {"chunk": config.sequential.chunk, "alpha": sequential_alpha(config),
                      "n_items": {t: ran.manifests["candidate"]["tasks"][t]["n_items"]
                                  for t in tasks},
                      "looks": looks.last}
    evidence = RunEvidence(
        sequential=sequential, speed=speed_records(ran.layouts, specs), preflight=checks,
        logprobs={name: read_arm_logprobs(layout.root, tasks)
                  for name, layout in ran.layouts.items()},
        repeats={name: read_arm_repeats(layout.root, tasks)
                 for name, layout in ran.layouts.items()},
        exercise=assess_config(config, {name: ran.manifests[name] for name in ARMS}),
        load_curve=load_curve_of(config, {name: ran.layouts[name].root for name in ARMS}))
    # pair, analyse, decide, record, report
    record = finish(kind="ab", run_dir=run_dir, tasks=list(config.tasks), gate=config.gate,
                    seed=config.seed, config_dump=json.loads(config.model_dump_json()),
                    samples=_arm_samples(ran.layouts, specs, tasks), manifests=ran.manifests,
                    echo=echo, evidence=evidence)
    record_in_store(store, run_dir, kind="ab", deployment=deployment_name(config), echo=echo)
    return ExitCode(record.exit_code), run_dir
