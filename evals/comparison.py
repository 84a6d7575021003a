"""One comparison, end to end: arms -> paired samples -> analysis -> verdict -> outputs.

`run_ab` runs both arms from a config; `run_compare` starts from two existing
lm-eval `--log_samples` directories. Both end in `finish`, which writes the run
directory (summary.json, paired_items.jsonl, report.html) and prints the table.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

from evals.analysis import TaskAnalysis, analyse_task, noise_floor
from evals.arm_spec import ArmSpec, package_versions
from evals.config import (DEFAULT_TASKS_DIR, REPO_ROOT, ABConfig, GateConfig, TaskSpec,
                          check_local_models)
from evals.errors import ExitCode, UserError
from evals.pairing import PairedTask, pair_task
from evals.run_record import build_summary, write_run
from evals.runner.launch import run_arm
from evals.runner.layout import ArmLayout
from evals.samples import ArmSamples, read_output_dir
from evals.sequential_plan import (first_items, item_order, look_alpha,
                                   sequential_for_task)
from evals.table import render_table
from evals.verdict import decide

ARMS = ("baseline", "candidate")
RERUN = "baseline_rerun"  # the baseline's second run, for the A/A noise floor
DEFAULT_REPORTS = REPO_ROOT / "reports"
PREFERRED_METRICS = ("acc", "exact_match", "acc_norm")


def run_id_for(config: ABConfig) -> str:
    blob = config.model_dump_json(exclude={"source", "description"}).encode()
    return f"{config.name}-{hashlib.sha256(blob).hexdigest()[:8]}"


def arm_specs(config: ABConfig, run_dir: Path) -> dict[str, ArmSpec]:
    include = [str(DEFAULT_TASKS_DIR)] + ([config.include_path] if config.include_path else [])
    versions = package_versions()
    specs = {}
    for name in ARMS:
        arm = config.arm(name)
        specs[name] = ArmSpec(
            arm=name, model=config.arm_model(name), engine=dict(arm.engine), env=dict(arm.env),
            tasks=tuple(t.name for t in config.tasks), limit=config.limit,
            num_fewshot=config.num_fewshot, seed=config.seed, include_paths=tuple(include),
            output_dir=str(run_dir / "arms" / name), versions=versions).with_fingerprint()
    if config.sequential:
        gated = sum(1 for t in config.tasks if t.gate)
        plan = {"chunk": config.sequential.chunk, "margin": config.gate.margin,
                "alpha": look_alpha(config.gate.alpha, gated),
                "metrics": {t.name: [t.metric, t.filter] for t in config.tasks}}
        specs["baseline"] = replace(specs["baseline"], sequential={**plan, "reference": None})
        reference = str(ArmLayout(Path(specs["baseline"].output_dir)).lm_eval_dir)
        specs["candidate"] = replace(specs["candidate"],
                                     sequential={**plan, "reference": reference})
    if config.noise_floor:
        specs[RERUN] = replace(specs["baseline"], arm=RERUN,
                               output_dir=str(run_dir / "arms" / RERUN))
    return specs


def _arm_identity(spec: ArmSpec) -> tuple:
    return (spec.model_hash, json.dumps(spec.engine, sort_keys=True),
            json.dumps(spec.env, sort_keys=True))


def check_arms_differ(config: ABConfig, specs: dict[str, ArmSpec]) -> None:
    same = _arm_identity(specs["baseline"]) == _arm_identity(specs["candidate"])
    if same and not config.expect_identical_arms:
        raise UserError(f"{config.source}: arms.baseline and arms.candidate are identical (same "
                        "model, engine and env); set `expect_identical_arms: true` for an A/A "
                        "check, or change the candidate.")
    if not same and config.expect_identical_arms:
        raise UserError(f"{config.source}: `expect_identical_arms: true`, but the arms differ "
                        "in model, engine or env.")


def check_effective_configs(config: ABConfig, manifests: dict[str, dict]) -> None:
    effective = [manifests[a].get("effective_engine_config") for a in ARMS]
    models = [manifests[a].get("model_hash") for a in ARMS]
    if config.expect_identical_arms or None in effective:
        return
    if effective[0] == effective[1] and models[0] == models[1] and \
            config.arms.baseline.env == config.arms.candidate.env:
        raise UserError(f"{config.source}: the arms ask for different engine arguments, but vLLM "
                        "ran both with identical effective configs (it ignored or defaulted the "
                        "difference); the comparison would test nothing.")


def run_ab(config: ABConfig, reports_dir: Path = DEFAULT_REPORTS, fresh: bool = False,
           echo=print) -> tuple[ExitCode, Path]:
    check_local_models(config)
    run_dir = Path(reports_dir) / run_id_for(config)
    specs = arm_specs(config, run_dir)
    check_arms_differ(config, specs)
    if fresh:
        for spec in specs.values():
            for marker in ArmLayout(Path(spec.output_dir)).tasks_dir.glob("*.json"):
                marker.unlink()
    echo(f"[evals] run {run_dir.name}: {len(config.tasks)} task(s), arms run one at a time")
    started = time.time()
    layouts = {}
    for name in specs:
        try:
            layouts[name] = run_arm(specs[name], echo=echo)
        except UserError as exc:
            raise UserError(f"{config.source}: {exc}") from None
    manifests = {name: layouts[name].read_manifest() for name in specs}
    for name in specs:
        manifests[name]["tasks"] = {t: layouts[name].task_record(t) for t in specs[name].tasks}
    check_effective_configs(config, manifests)
    tasks = [t.name for t in config.tasks]
    samples = {name: read_output_dir(layouts[name].lm_eval_dir, tasks) for name in specs}
    echo(f"[evals] both arms finished in {time.time() - started:.0f} s; analysing")
    sequential = None
    if config.sequential:
        sequential = {"chunk": specs["candidate"].sequential["chunk"],
                      "alpha": specs["candidate"].sequential["alpha"],
                      "n_items": {t: manifests["candidate"]["tasks"][t]["n_items"] for t in tasks}}
    return finish(kind="ab", run_dir=run_dir, tasks=list(config.tasks), gate=config.gate,
                  seed=config.seed, config_dump=json.loads(config.model_dump_json()),
                  samples=samples, manifests=manifests, echo=echo,
                  sequential=sequential), run_dir


def _default_metric(samples: ArmSamples, task: str) -> str:
    names = next(r.metrics for r in samples.records if r.task == task)
    for preferred in PREFERRED_METRICS:
        if preferred in names:
            return preferred
    return sorted(names)[0]


def run_compare(dir_a: Path, dir_b: Path, *, gate: GateConfig, seed: int = 1234,
                metrics: dict[str, str] | None = None, reports_dir: Path = DEFAULT_REPORTS,
                echo=print) -> tuple[ExitCode, Path]:
    """Analyses two existing lm-eval --log_samples directories (baseline first)."""
    a, b = read_output_dir(dir_a), read_output_dir(dir_b)
    common = sorted(set(a.tasks()) & set(b.tasks()))
    if not common:
        raise UserError(f"{dir_a} and {dir_b} share no task (baseline has "
                        f"{', '.join(a.tasks())}; candidate has {', '.join(b.tasks())}).")
    only = sorted(set(a.tasks()) ^ set(b.tasks()))
    if only:
        raise UserError(f"task(s) {', '.join(only)} are in only one of {dir_a} and {dir_b}; "
                        "compare directories that ran the same tasks.")
    blob = f"{Path(dir_a).resolve()}|{Path(dir_b).resolve()}".encode()
    run_dir = Path(reports_dir) / f"compare-{hashlib.sha256(blob).hexdigest()[:8]}"
    manifests = {"baseline": {"source": str(dir_a), "lm_eval_config": a.lm_eval_config},
                 "candidate": {"source": str(dir_b), "lm_eval_config": b.lm_eval_config}}
    metrics = metrics or {}
    unknown = sorted(set(metrics) - set(common))
    if unknown:
        raise UserError(f"--metric names task(s) {', '.join(unknown)} that the directories do "
                        f"not hold (they hold {', '.join(common)}).")
    tasks = [TaskSpec(name=t, metric=metrics.get(t) or _default_metric(a, t)) for t in common]
    config_dump = {"baseline_dir": str(dir_a), "candidate_dir": str(dir_b), "seed": seed,
                   "gate": gate.model_dump(), "tasks": [t.model_dump() for t in tasks]}
    return finish(kind="compare", run_dir=run_dir, tasks=tasks, gate=gate, seed=seed,
                  config_dump=config_dump, samples={"baseline": a, "candidate": b},
                  manifests=manifests, echo=echo), run_dir


def finish(*, kind: str, run_dir: Path, tasks: list[TaskSpec], gate: GateConfig, seed: int,
           config_dump: dict, samples: dict[str, ArmSamples], manifests: dict[str, dict],
           echo=print, sequential: dict | None = None) -> ExitCode:
    paired: list[PairedTask] = []
    analyses: list[TaskAnalysis] = []
    warnings: list[str] = []
    for spec in tasks:
        p = pair_task(samples["baseline"], samples["candidate"], spec.name, spec.metric,
                      spec.filter, baseline_superset=sequential is not None)
        paired.append(p)
        looks = None
        if sequential is not None:
            n_items = sequential["n_items"][spec.name]
            order = item_order(n_items, seed, spec.name)
            looks = sequential_for_task(p, order, chunk=sequential["chunk"],
                                        alpha=sequential["alpha"], margin=gate.margin,
                                        n_items=n_items)
            p = paired[-1] = first_items(p, order, looks.items_used)
        noise = None
        if RERUN in samples:
            rerun = pair_task(samples["baseline"], samples[RERUN], spec.name, spec.metric,
                              p.filter)  # both ran the full item set
            noise = noise_floor(rerun)
        analyses.append(analyse_task(p, gated=spec.gate, alpha=gate.alpha, margin=gate.margin,
                                     seed=seed, n_resamples=gate.bootstrap_resamples,
                                     noise=noise, sequential=looks))
        hb = samples["baseline"].task_hashes.get(spec.name)
        hc = samples["candidate"].task_hashes.get(spec.name)
        if hb and hc and hb != hc:
            warnings.append(f"task {spec.name}: lm-eval task hashes differ between arms "
                            f"({hb[:12]} vs {hc[:12]})")
    verdict = decide(analyses, alpha=gate.alpha, margin=gate.margin, correction=gate.correction)
    summary = build_summary(
        kind=kind, run_id=run_dir.name, config=config_dump, analyses=analyses, verdict=verdict,
        arms=manifests, sources={name: s.source for name, s in samples.items()},
        warnings=warnings)
    write_run(run_dir, summary, paired)
    from evals.report import write_reports  # rendering is the last step of the flow
    written = write_reports(run_dir)
    echo(render_table(summary))
    for warning in warnings:
        echo(f"warning: {warning}")
    echo(f"report: {written['html']}")
    return ExitCode(summary["exit_code"])
