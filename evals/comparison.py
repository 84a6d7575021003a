"""The three pipelines, each a short sequence of the stages (README, "How the code is laid
out"): plan -> preflight -> run -> pair -> analyse -> decide -> record -> report.

- `run_ab`: both arms of a config are run (or reused from the run store) and compared.
- `run_drift`: a deployment's arm is run again and compared with its pinned golden run.
- `run_compare`: two existing lm-eval `--log_samples` directories; no run stage.

All three end in `finish`: pair the items, analyse each task, decide (the statistical gate,
then the gate list of evals.decide.gates), record (summary.json, paired_items.jsonl) and report.
The run store records the run last (`record_in_store`).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from evals.analyse.analysis import TaskAnalysis, analyse_task, noise_floor, task_rng
from evals.run.arms import (RERUN, arm_specs, fresh_or_reused, run_arms, run_arms_on_ray,
                            run_id_for, speed_records)
from evals.analyse.cache_stress import WARM_SUFFIX, WarmColdCheck, describe, warm_vs_cold
from evals.pair.clusters import cluster_ids
from evals.plan.config import DEFAULT_SEED, ABConfig, GateConfig, TaskSpec
from evals.decide.drift import KIND as DRIFT_KIND
from evals.decide.drift import (apply_chart, chart_tasks, deployment_name, drift_run_id,
                         golden_arm_dir, history_points, summary_extras)
from evals.analyse.early_stop import Looks, first_items, sequential_for_task
from evals.errors import ExitCode, UserError
from evals.analyse.exercise import ExerciseReport, assess, declared_optimizations
from evals.decide.gates import Gate, run_gates
from evals.pair.metric_scale import pair_normalised
from evals.pair.pairing import PairedTask, pair_task
from evals.paths import ARMS, REPORTS_DIR
from evals.preflight.checks import (AuditWhileStarting, ResolvedInWorkers, check_arms_differ,
                                    check_effective_configs, check_inputs, config_audit,
                                    doctor_checks, with_resolved_configs)
from evals.report.terminal_table import render_table
from evals.record.platform_record import platform_warnings, run_platform
from evals.record.run_record import build_summary, write_run
from evals.record.run_record_model import RunRecord
from evals.runner.layout import ArmLayout
from evals.pair.samples import ArmSamples, read_output_dir
from evals.pair.logprobs import TaskLogprobs, read_arm_logprobs
from evals.analyse.shift import ShiftAnalysis, adjust, analyse_shift, shifted
from evals.record.run_record import shift_record
from evals.store import open_store, record_in_store
from evals.plan.schedule import item_order, sequential_alpha
from evals.analyse.speed import compare_speed
from evals.analyse.task_warnings import task_warnings
from evals.text_hygiene import visible
from evals.decide.verdict import apply_exercise_gate, apply_shift_gate, apply_speed_gate, decide

WARM = "_warm"  # samples[<arm>_warm]: a cache-stress arm's warm pass
DEFAULT_REPORTS = REPORTS_DIR
PREFERRED_METRICS = ("acc", "exact_match", "acc_norm")


@dataclass(frozen=True)
class Executor:
    """Where arms run: this machine (`local`, the default) or Ray tasks (`ray`, at `address`,
    None: a local Ray); `parallel`: most arms at once (evals.run.concurrent);
    `arms_per_gpu`: most one-GPU arms sharing one GPU at once (local studies only)."""

    ray: bool = False
    address: str | None = None
    parallel: int | None = None
    arms_per_gpu: int = 1
    shard_tasks: bool = False
    """Ray: one Ray task per arm x task instead of per arm."""

    def check(self) -> None:
        """Preflight: Ray is installed and its cluster reachable (else one UserError)."""
        if self.ray:
            from evals.run.ray_executor import connect
            connect(self.address)


LOCAL = Executor()


@dataclass(frozen=True)
class DriftInput:
    """What the drift chart gate needs: earlier drift runs and the config's chart."""

    history: dict
    lam: float
    L: float
    deployment: str
    golden_run: str
    arm: str


@dataclass(frozen=True)
class RunEvidence:
    """What the run stage found besides the items: it feeds the gates and the summary."""

    sequential: dict | None = None
    speed: dict[str, dict] | None = None
    exercise: ExerciseReport | None = None
    preflight: dict | None = None
    drift: DriftInput | None = None
    logprobs: dict[str, dict[str, TaskLogprobs]] | None = None
    """Each arm's per-token top-k log-probabilities, by task (`logprobs: k`)."""


def _arm_samples(layouts: dict[str, ArmLayout], specs, tasks: list[str]) -> dict:
    samples = {name: read_output_dir(layouts[name].lm_eval_dir, tasks) for name in layouts}
    for name in ARMS:
        if name in specs and specs[name].cache_stress:
            samples[name + WARM] = read_output_dir(layouts[name].warm_layout().lm_eval_dir, tasks)
    return samples


def run_ab(config: ABConfig, reports_dir: Path = DEFAULT_REPORTS, fresh: bool = False,
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
    fresh_or_reused(specs, store, fresh, echo)
    # run: the audit resolves both arms while the first engine starts
    echo(f"[evals] run {run_dir.name}: {len(config.tasks)} task(s), arms run one at a time")
    started = time.time()
    # locally, the arms' own workers resolve their configs for the audit (no vLLM import of
    # its own); a Ray task cannot answer, so there the audit's resolver processes do
    in_workers = None if executor.ray else ResolvedInWorkers(specs)
    audit = AuditWhileStarting(lambda: config_audit(
        config, specs, allow_undeclared=allow_undeclared, echo=echo, in_workers=in_workers))
    looks = None
    if config.sequential:
        looks = Looks(config, ArmLayout(Path(specs["baseline"].output_dir)).lm_eval_dir,
                      ArmLayout(Path(specs["candidate"].output_dir)).lm_eval_dir)
    if executor.ray:  # a Ray task cannot wait for the audit's go: the audit goes first
        outcome = audit.join()
        layouts, manifests, where = run_arms_on_ray(config, specs, echo, executor)
        echo(f"[evals] arms ran on Ray: {where['arms']}")
    else:
        layouts, manifests = run_arms(config, specs, echo,
                                      {"candidate": looks} if looks else None, audit,
                                      in_workers)
        outcome = audit.join()
    checks = {**checks, "audit": outcome.audit,
              "warnings": checks["warnings"] + list(outcome.warnings)}
    manifests = with_resolved_configs(manifests, outcome.resolved)
    check_effective_configs(config, manifests, specs)
    echo(f"[evals] both arms finished in {time.time() - started:.0f} s; analysing")
    tasks = [t.name for t in config.tasks]
    sequential = None
    if config.sequential:
        sequential = {"chunk": config.sequential.chunk, "alpha": sequential_alpha(config),
                      "n_items": {t: manifests["candidate"]["tasks"][t]["n_items"] for t in tasks},
                      "looks": looks.last}
    evidence = RunEvidence(
        sequential=sequential, speed=speed_records(layouts, specs), preflight=checks,
        logprobs={name: read_arm_logprobs(layout.root, tasks)
                  for name, layout in layouts.items()},
        exercise=assess(declared_optimizations(config.arm("baseline").engine,
                                               config.arm("candidate").engine),
                        {name: manifests[name] for name in ARMS},
                        {t.name: t.gate for t in config.tasks}))
    # pair, analyse, decide, record, report
    record = finish(kind="ab", run_dir=run_dir, tasks=list(config.tasks), gate=config.gate,
                    seed=config.seed, config_dump=json.loads(config.model_dump_json()),
                    samples=_arm_samples(layouts, specs, tasks), manifests=manifests, echo=echo,
                    evidence=evidence)
    record_in_store(store, run_dir, kind="ab", deployment=deployment_name(config), echo=echo)
    return ExitCode(record.exit_code), run_dir


def run_drift(config: ABConfig, reports_dir: Path = DEFAULT_REPORTS, echo=print,
              store_root: Path | None = None, run_id: str | None = None) -> tuple[ExitCode, Path]:
    """Reruns the deployment arm and compares it with the golden run (see evals.decide.drift)."""
    # plan and preflight
    check_inputs(config)
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
        exercise=assess(declared_optimizations({}, config.arm(arm).engine),
                        {"candidate": manifests["candidate"]},
                        {t.name: t.gate for t in config.tasks}),
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


def _default_metric(samples: ArmSamples, task: str) -> str:
    names = next(r.metrics for r in samples.records if r.task == task)
    for preferred in PREFERRED_METRICS:
        if preferred in names:
            return preferred
    return sorted(names)[0]


def _digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()[:8]


def _outputs_digest(*dirs: Path) -> str:
    """Hash of every lm-eval samples and results file under the directories (name and
    bytes), in a stable order."""
    digest = hashlib.sha256()
    for root in dirs:
        root = Path(root)
        for path in sorted(list(root.rglob("samples_*.jsonl")) + list(root.rglob("results_*.json"))):
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        digest.update(b"\1")
    return digest.hexdigest()[:12]


def run_compare(dir_a: Path, dir_b: Path, *, gate: GateConfig, seed: int = DEFAULT_SEED,
                metrics: dict[str, str] | None = None, reports_dir: Path = DEFAULT_REPORTS,
                echo=print, store_root: Path | None = None,
                clusters: dict[str, str] | None = None, name: str = "compare",
                deployment: str | None = None) -> tuple[ExitCode, Path]:
    """Analyses two existing lm-eval --log_samples directories (baseline first).

    `name`: the run id's prefix; `deployment`: what the run store charts it under
    (default: one deployment per pair of paths, so unrelated comparisons never share a
    trend chart)."""
    a, b = read_output_dir(dir_a), read_output_dir(dir_b)
    same_dir = Path(dir_a).resolve() == Path(dir_b).resolve()
    common = sorted(set(a.tasks()) & set(b.tasks()))
    if not common:
        raise UserError(f"{dir_a} and {dir_b} share no task (baseline has "
                        f"{', '.join(a.tasks())}; candidate has {', '.join(b.tasks())}).")
    only = sorted(set(a.tasks()) ^ set(b.tasks()))
    if only:
        raise UserError(f"task(s) {', '.join(only)} are in only one of {dir_a} and {dir_b}; "
                        "compare directories that ran the same tasks.")
    paths_key = _digest(f"{Path(dir_a).resolve()}|{Path(dir_b).resolve()}".encode())
    # the id covers the files' content, so a rerun on changed outputs is a new run (the old
    # one, possibly a pinned golden run, keeps its meaning); the same content, the same id
    run_dir = Path(reports_dir) / f"{name}-{_outputs_digest(dir_a, dir_b)}"
    manifests = {"baseline": {"source": str(dir_a), "lm_eval_config": a.lm_eval_config},
                 "candidate": {"source": str(dir_b), "lm_eval_config": b.lm_eval_config}}
    metrics = metrics or {}
    clusters = clusters or {}
    for flag, named in (("--metric", metrics), ("--cluster", clusters)):
        unknown = sorted(set(named) - set(common))
        if unknown:
            raise UserError(f"{flag} names task(s) {', '.join(unknown)} that the directories "
                            f"do not hold (they hold {', '.join(common)}).")
    tasks = [TaskSpec(name=t, metric=metrics.get(t) or _default_metric(a, t),
                      cluster=clusters.get(t)) for t in common]
    config_dump = {"baseline_dir": str(dir_a), "candidate_dir": str(dir_b), "seed": seed,
                   "gate": gate.model_dump(), "tasks": [t.model_dump() for t in tasks]}
    preflight = {"warnings": [f"baseline and candidate are the same directory ({dir_a}): this "
                              "compares a run with itself"]} if same_dir else None
    record = finish(kind="compare", run_dir=run_dir, tasks=tasks, gate=gate, seed=seed,
                    config_dump=config_dump, samples={"baseline": a, "candidate": b},
                    manifests=manifests, echo=echo, evidence=RunEvidence(preflight=preflight))
    record_in_store(open_store(reports_dir, store_root), run_dir, kind="compare",
                    deployment=deployment or f"{name}-{paths_key}", echo=echo)
    return ExitCode(record.exit_code), run_dir


@dataclass(frozen=True)
class Analysed:
    """A comparison after the pair and analyse stages."""

    paired: list[PairedTask]
    analyses: list[TaskAnalysis]
    cache_checks: list[WarmColdCheck]
    warnings: list[str]
    shifts: list[ShiftAnalysis] = field(default_factory=list)
    shift_notes: dict[str, str] = field(default_factory=dict)
    """Why a task has no shift analysis."""


def finish(*, kind: str, run_dir: Path, tasks: list[TaskSpec], gate: GateConfig, seed: int,
           config_dump: dict, samples: dict[str, ArmSamples], manifests: dict[str, dict],
           echo=print, evidence: RunEvidence | None = None, analysed: Analysed | None = None,
           study_adjusted: dict[str, float] | None = None, run_id: str | None = None
           ) -> RunRecord:
    """Pair, analyse, decide, record and report one run; its record (whose `exit_code` is
    its verdict's).

    A study passes each comparison `analysed` already, and its tasks' regression p-values
    adjusted over the whole study (`study_adjusted`, evals.decide.verdict.study_family),
    and the comparison's `run_id` (default: the run directory's name)."""
    evidence = evidence or RunEvidence()
    if analysed is None:
        analysed = pair_and_analyse(run_dir, tasks, gate, seed, samples, evidence.sequential,
                                    evidence.logprobs)
    shifts = adjust(analysed.shifts, gate.alpha)
    gated = {t.name for t in tasks if t.gate}
    shifted_tasks = [(s.task, s.pvalue_adjusted) for s in shifts
                     if s.task in gated and shifted(s, gate.alpha)]
    paired, analyses, cache_checks = analysed.paired, analysed.analyses, analysed.cache_checks
    warnings = list((evidence.preflight or {}).get("warnings", [])) + analysed.warnings
    verdict, steps, extras = _decide(analyses, gate, seed, manifests, evidence, run_dir,
                                     study_adjusted, shifted_tasks)
    if gate.logprob == "warn":
        regressed = {t.task for t in verdict.tasks if t.verdict.value == "REGRESSION"}
        warnings.extend(
            f"task {task}: the token distributions shifted beyond the A/A noise floor "
            f"(Holm p={p:.2g}) - accuracy does not show it (gate.logprob: warn)"
            for task, p in shifted_tasks if task not in regressed)
    if evidence.exercise is not None:
        warnings.extend(evidence.exercise.warnings)
    platform = run_platform(kind, manifests)
    warnings.extend(platform_warnings(manifests))
    speedup = extras.pop("speed", None)
    summary = build_summary(
        kind=kind, run_id=run_id or run_dir.name, config=config_dump, analyses=analyses, verdict=verdict,
        arms=manifests, sources={name: s.source for name, s in samples.items()},
        warnings=warnings, speed=speedup, cache_stress=cache_checks, platform=platform,
        drift=extras.get("drift"), gates=steps,
        exercise=evidence.exercise.to_dict() if evidence.exercise is not None else None,
        faults={arm: m["faults"] for arm, m in manifests.items() if m.get("faults")},
        preflight=({k: v for k, v in evidence.preflight.items() if k != "warnings"}
                   if evidence.preflight else None),
        shift={"gate": gate.logprob, "alpha": gate.alpha,
               "tasks": [shift_record(s) for s in shifts], "notes": analysed.shift_notes})
    write_run(run_dir, summary, paired)
    from evals.report import write_reports  # rendering is the last step of the flow
    written = write_reports(run_dir)
    echo(render_table(summary))
    for warning in warnings:
        echo(visible(f"warning: {warning}"))
    echo(f"report: {written['html']}")
    return summary


def pair_and_analyse(run_dir: Path, tasks: list[TaskSpec], gate: GateConfig, seed: int,
                     samples: dict[str, ArmSamples], sequential: dict | None = None,
                     logprobs: dict[str, dict[str, TaskLogprobs]] | None = None) -> Analysed:
    """Every task's paired items and analysis (plus a cache-stress arm's warm pass), and
    its distribution shift (evals.analyse.shift)."""
    logprobs = logprobs or {}
    shifts: list[ShiftAnalysis] = []
    shift_notes: dict[str, str] = {}
    paired: list[PairedTask] = []
    analyses: list[TaskAnalysis] = []
    warnings: list[str] = []
    cache_checks: list[WarmColdCheck] = []
    for spec in tasks:
        def pair(first: str, second: str, filter_name, spec=spec, **kwargs) -> PairedTask:
            return pair_normalised(spec, samples[first], samples[second], filter_name,
                                   run_dir.name, **kwargs)

        p = pair("baseline", "candidate", spec.filter, baseline_superset=sequential is not None)
        paired.append(p)
        looks = None
        if sequential is not None:
            n_items = sequential["n_items"][spec.name]
            order = item_order(n_items, seed, spec.name)
            looks = sequential.get("looks", {}).get(spec.name)
            if looks is None or looks.items_used != p.n:  # e.g. resumed: no live look
                looks = sequential_for_task(p, order, chunk=sequential["chunk"],
                                            alpha=sequential["alpha"], margin=gate.margin,
                                            n_items=n_items)
            p = paired[-1] = first_items(p, order, looks.items_used)
        noise = rerun = None
        if RERUN in samples:
            rerun = pair_task(samples["baseline"], samples[RERUN], spec.name, spec.metric,
                              p.filter)  # both ran the full item set
            noise = noise_floor(rerun)
        shift = analyse_shift(
            p, baseline=logprobs.get("baseline", {}).get(spec.name),
            candidate=logprobs.get("candidate", {}).get(spec.name),
            rerun=logprobs.get(RERUN, {}).get(spec.name), rerun_paired=rerun,
            seed_rng=task_rng(seed, spec.name + ":shift"),
            confidence_level=1 - 2 * gate.alpha)
        if isinstance(shift, str):
            shift_notes[spec.name] = shift
        else:
            shifts.append(shift)
        clusters = cluster_ids(p, spec.cluster, str(run_dir.name)) if spec.cluster else None
        analyses.append(analyse_task(p, gated=spec.gate, alpha=gate.alpha, margin=gate.margin,
                                     seed=seed, n_resamples=gate.bootstrap_resamples,
                                     noise=noise, sequential=looks, clusters=clusters))
        for arm in ARMS:
            if arm + WARM not in samples:
                continue
            cold_warm = pair(arm, arm + WARM, p.filter)
            check = warm_vs_cold(arm, cold_warm)
            cache_checks.append(check)
            if check.outputs_changed:
                warnings.append(describe(check))
            if arm == "candidate":
                warm = replace(pair("baseline", arm + WARM, p.filter),
                               task=spec.name + WARM_SUFFIX)
                paired.append(warm)
                analyses.append(analyse_task(
                    warm, gated=spec.gate, alpha=gate.alpha, margin=gate.margin, seed=seed,
                    n_resamples=gate.bootstrap_resamples))
        hb = samples["baseline"].task_hashes.get(spec.name)
        hc = samples["candidate"].task_hashes.get(spec.name)
        if hb and hc and hb != hc:
            warnings.append(f"task {spec.name}: lm-eval task hashes differ between arms "
                            f"({hb[:12]} vs {hc[:12]})")
    warnings.extend(task_warnings(analyses))
    return Analysed(paired, analyses, cache_checks, warnings, shifts, shift_notes)


def _decide(analyses: list[TaskAnalysis], gate: GateConfig, seed: int,
            manifests: dict[str, dict], evidence: RunEvidence, run_dir: Path,
            study_adjusted: dict[str, float] | None = None,
            shifted_tasks: list[tuple[str, float]] = ()):
    """The statistical gate, then the gate list (evals.decide.gates). Returns the verdict, the
    steps and what the gates add to the summary (`speed`, `drift`)."""
    gates: list[Gate] = []
    extras: dict = {}
    if evidence.speed:
        speedup = compare_speed(
            evidence.speed.get("baseline", {}), evidence.speed.get("candidate", {}),
            spec_decode={a: manifests.get(a, {}).get("spec_decode") for a in ARMS},
            rng=task_rng(seed, "speed"), confidence=1 - 2 * gate.alpha,
            min_speedup=gate.min_speedup)
        extras["speed"] = speedup
        gates.append(Gate("speed", partial(apply_speed_gate, speed=speedup)))
    if evidence.exercise is not None:
        gates.append(Gate("exercise", partial(apply_exercise_gate, report=evidence.exercise)))
    if evidence.drift is not None:
        d = evidence.drift
        charts = chart_tasks(analyses, d.history, lam=d.lam, L=d.L, run_id=run_dir.name)
        extras.update(summary_extras(d.deployment, d.golden_run, d.arm, charts))
        gates.append(Gate("drift chart", partial(apply_chart, charts=charts)))
    first = decide(analyses, alpha=gate.alpha, margin=gate.margin, correction=gate.correction,
                   pooled=gate.pooled, study_adjusted=study_adjusted)
    if gate.logprob == "fail":
        gates.append(Gate("logprob shift", partial(apply_shift_gate, shifted=shifted_tasks)))
    verdict, steps = run_gates(first, gates)
    return verdict, steps, extras
