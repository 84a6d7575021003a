"""`python -m evals canary CONFIG`: does the gate catch faults modeled on real vLLM bugs?

Runs the config once as an ordinary A/B (baseline, reused from the run store when it can
be, and the clean candidate), then once more per canary fault that applies to what the
candidate enables, with the fault injected into the candidate's engine only
(evals.faults). Each run goes through the ordinary runner and gate. A harmful fault must
give REGRESSION, a benign one must not. Written to `<reports>/canary-<run id>/`:
`canary.json` and `canary.html`.

For each fault the smallest rate the config's tasks and item counts would catch with 80%
power is estimated from the observed flips: the per-item flip probabilities each way are
taken as linear in the rate between the clean run (rate 0) and the faulty run, and the
exact one-sided McNemar test's power at the gate's level (Bonferroni over gated tasks, a
conservative stand-in for Holm) is searched over the rate.
"""

from __future__ import annotations

import time
from pathlib import Path

from evals.errors import ExitCode
from evals.hardware import probe
from evals.paths import REPORTS_DIR
from evals.pipelines.ab import run_ab
from evals.plan.canary import default_faults, faulty_config, with_v1_runner
from evals.plan.config import ABConfig
from evals.preflight.cpu_support import engine_on_cpu
from evals.record.canary_record import TARGET_POWER, CanaryRecord, CleanRun, fault_result
from evals.schemas import CANARY
from evals.record.run_record import read_run_record
from evals.dispatch.arms import run_id_for


def run_canary(config: ABConfig, reports_dir: Path = REPORTS_DIR, *,
               faults: list[dict] | None = None, store_root: Path | None = None,
               echo=print) -> tuple[ExitCode, Path]:
    """The clean A/B, then one A/B per fault; canary.json and canary.html. Exit 0 only if
    every harmful fault was caught and no benign one was."""
    wanted = faults if faults is not None else default_faults(config)
    runner = "vLLM's default"
    if not engine_on_cpu(probe()):  # a GPU's vLLM: the sampling faults patch the V1 runner
        config, runner = with_v1_runner(config), "V1 (VLLM_USE_V2_MODEL_RUNNER=0)"
    configs = [(fault, faulty_config(config, fault)) for fault in wanted]  # all checked first
    canary_dir = Path(reports_dir) / f"canary-{run_id_for(config)}"
    started = time.time()
    echo(f"[evals] canary: clean run of {config.name}, then {len(configs)} fault(s): "
         f"{', '.join(f['name'] for f in wanted)}")
    clean_code, clean_dir = run_ab(config, reports_dir, store_root=store_root, echo=echo)
    clean = read_run_record(clean_dir)
    clean_seconds = time.time() - started
    results = []
    for fault, faulty in configs:
        echo(f"[evals] canary: candidate with fault {fault['name']}")
        code, run_dir = run_ab(faulty, reports_dir, store_root=store_root, echo=echo)
        results.append(fault_result(fault, code, run_dir, clean, config.gate.alpha))
    record = CanaryRecord(
        config=str(config.source), name=config.name,
        clean=CleanRun(run_id=clean_dir.name, verdict=clean.verdict, exit_code=int(clean_code),
                       wall_seconds=round(clean_seconds, 1)),
        faults=results, exercise=clean.exercise, runner=runner,
        wall_seconds=round(time.time() - started, 1), target_power=TARGET_POWER,
        passed=all(r.as_expected for r in results))
    canary_dir.mkdir(parents=True, exist_ok=True)
    CANARY.write(canary_dir / "canary.json", record.model_dump())
    from evals.report.canary import render_canary_table, write_canary_page  # rendering is last

    page = write_canary_page(record, canary_dir / "canary.html")
    echo(render_canary_table(record))
    echo(f"canary report: {page}")
    missed = [r for r in results if not r.as_expected]
    if missed:
        for r in missed:
            why = "it never fired (tested nothing)" if not r.fired else f"gave {r.verdict}"
            echo(f"CANARY FAILED: {r.fault} ({'harmful' if r.harmful else 'benign'}) {why}")
        return ExitCode.REGRESSION, canary_dir
    return ExitCode.PASS, canary_dir
