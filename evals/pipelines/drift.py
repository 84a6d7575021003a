"""`python -m evals drift CONFIG`: a deployment's arm runs again and is compared with its
pinned golden run (evals.decide.drift); the drift chart is one of the gates."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from evals.analyse.exercise import assess_config
from evals.decide.drift import KIND as DRIFT_KIND
from evals.decide.drift import DriftInput, drift_run_id, golden_arm_dir, history_points
from evals.errors import ExitCode, UserError
from evals.pair.samples import read_output_dir
from evals.paths import REPORTS_DIR
from evals.pipelines.finish import RunEvidence, finish
from evals.plan.config import ABConfig, deployment_name
from evals.preflight.checks import check_inputs, doctor_checks
from evals.dispatch.arms import arm_specs, run_arms, run_id_for
from evals.store import open_store, record_in_store


def run_drift(config: ABConfig, reports_dir: Path = REPORTS_DIR, echo=print,
              store_root: Path | None = None, run_id: str | None = None) -> tuple[ExitCode, Path]:
    """Reruns the deployment arm and compares it with the golden run (see evals.decide.drift)."""
    # plan and preflight
    check_inputs(config)
    if config.repeats > 1:  # the golden run's stored repeats are not read back yet
        raise UserError(f"{config.source}: `repeats` is not supported by drift runs yet; "
                        "compare sampled runs with `ab`.")
    store = open_store(reports_dir, store_root)
    deployment = deployment_name(config)
    golden = store.golden(deployment)
    if golden is None:
        raise UserError(f"{config.source}: deployment `{deployment}` has no golden run in "
                        f"{store.root}; run `python -m evals ab {config.source}` (or a drift run) "
                        f"and pin it: `python -m evals pin RUN_ID --deployment {deployment}`.")
    checks = doctor_checks(config, echo=echo)
    arm = config.drift.arm
    golden_dir = golden_arm_dir(golden.source_dir, arm, deployment)
    run_dir = Path(reports_dir) / (run_id or drift_run_id(run_id_for(config)))
    specs = {"candidate": replace(arm_specs(config, run_dir)[arm], arm="candidate",
                                  output_dir=str(run_dir / "arms" / "candidate"),
                                  sequential=None)}
    # run: the deployment's arm again; the golden run's outputs are the baseline
    echo(f"[evals] drift run {run_dir.name}: deployment {deployment}, arm `{arm}` again vs "
         f"golden run {golden.run_id}")
    layouts, manifests = run_arms(config, specs, echo)
    tasks = [t.name for t in config.tasks]
    samples = {"baseline": read_output_dir(golden_dir, tasks),
               "candidate": read_output_dir(layouts["candidate"].lm_eval_dir, tasks)}
    manifests["baseline"] = {"source": str(golden_dir), "golden_run": golden.run_id}
    evidence = RunEvidence(
        preflight=checks,
        exercise=assess_config(config, {"candidate": manifests["candidate"]}, candidate=arm,
                               baseline=None),
        drift=DriftInput(history=history_points(store, deployment, tasks, exclude=run_dir.name),
                         lam=config.drift.lam, L=config.drift.L, deployment=deployment,
                         golden_run=golden.run_id, arm=arm))
    # pair, analyse, decide (the drift chart is a gate), record, report
    record = finish(kind=DRIFT_KIND, run_dir=run_dir, tasks=list(config.tasks),
                    gate=config.gate, seed=config.seed,
                    config_dump=json.loads(config.model_dump_json()), samples=samples,
                    manifests=manifests, echo=echo, evidence=evidence)
    record_in_store(store, run_dir, kind=DRIFT_KIND, deployment=deployment, echo=echo)
    return ExitCode(record.exit_code), run_dir
