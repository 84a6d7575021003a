"""One comparison, end to end: arms -> paired samples -> analysis -> verdict -> outputs.

`run_ab` runs both arms from a config; `run_compare` starts from two existing
lm-eval `--log_samples` directories. Both end in `finish`, which writes the run
directory (summary.json, paired_items.jsonl, report.html) and prints the table.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

from evals.analysis import TaskAnalysis, analyse_task, noise_floor, task_rng
from evals.arm_spec import ArmSpec, package_versions
from evals.audit import audit_resolved
from evals.doctor import diagnose_config
from evals.cache_stress import WARM_SUFFIX, WarmColdCheck, describe, warm_vs_cold
from evals.drift import KIND as DRIFT_KIND
from evals.drift import (apply_chart, chart_tasks, deployment_name, drift_run_id,
                         golden_arm_dir, history_points, summary_extras)
from evals.reuse import reuse_finished_tasks
from evals.config import (DEFAULT_TASKS_DIR, ABConfig, GateConfig, TaskSpec,
                          check_local_models)
from evals.errors import ExitCode, UserError
from evals.faults.catalog import check_vllm_version, installed_vllm
from evals.exercise import ExerciseReport, apply_exercise_gate, assess, declared_optimizations
from evals.clusters import cluster_ids
from evals.metric_scale import normalise_metric
from evals.paths import ARMS, REPORTS_DIR
from evals.pairing import PairedTask, pair_task
from evals.records import SPEED_RECORD
from evals.run_record import build_summary, write_run
from evals.runner.config_resolver import recorded_arms, resolve_arms
from evals.runner.launch import arm_is_complete, run_arm
from evals.runner.layout import ArmLayout
from evals.runner.task_index import unknown_tasks
from evals.samples import ArmSamples, read_output_dir
from evals.runner.asks import Answerer
from evals.schedule import item_order
from evals.early_stop import (SequentialSummary, first_items, look_alpha,
                                   sequential_for_task)
from evals.speed import compare_speed
from evals.report.terminal_table import render_table
from evals.text_hygiene import visible
from evals.task_warnings import task_warnings
from evals.verdict import apply_speed_gate, decide

RERUN = "baseline_rerun"  # the baseline's second run, for the A/A noise floor
WARM = "_warm"  # samples[<arm>_warm]: a cache-stress arm's warm pass
DEFAULT_REPORTS = REPORTS_DIR
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
            output_dir=str(run_dir / "arms" / name), versions=versions, mode=arm.mode,
            serving={"concurrency": arm.concurrency, "base_url": arm.base_url,
                     "api_key_env": arm.api_key_env,
                     "served_model_name": arm.served_model_name},
            cache_stress=arm.cache_stress, lora_adapter=arm.lora_adapter,
            structured_output=arm.structured_output,
            faults=tuple(f.model_dump() for f in arm.faults)).with_fingerprint()
    if config.sequential:
        chunk = config.sequential.chunk
        specs["baseline"] = replace(specs["baseline"], sequential={"chunk": chunk})
        specs["candidate"] = replace(specs["candidate"], sequential={
            "chunk": chunk, "look": True, "stop_rule": [
                _look_alpha(config), config.gate.margin,
                {t.name: [t.metric, t.filter] for t in config.tasks}]})
    if config.noise_floor:
        specs[RERUN] = replace(specs["baseline"], arm=RERUN,
                               output_dir=str(run_dir / "arms" / RERUN))
    return specs


def _look_alpha(config: ABConfig) -> float:
    return look_alpha(config.gate.alpha, sum(1 for t in config.tasks if t.gate))


def _pair(spec: TaskSpec, first: ArmSamples, second: ArmSamples, filter_name, where: str,
          **kwargs) -> PairedTask:
    """Two arms' items of one task, on the accuracy scale (evals.metric_scale)."""
    return normalise_metric(pair_task(first, second, spec.name, spec.metric, filter_name,
                                      **kwargs),
                            scale=spec.scale, metric_type=spec.metric_type, where=where)


class Looks:
    """The parent's answers to a sequential candidate's "stop now?" (evals.runner.asks):
    after each chunk, the items so far paired with the baseline's and the sequential test
    (evals.early_stop). Each task's last look is kept for the analysis, which so
    does not compute it again."""

    def __init__(self, config: ABConfig, baseline_dir: Path, candidate_dir: Path):
        self.config, self.baseline_dir, self.candidate_dir = config, baseline_dir, candidate_dir
        self.last: dict[str, SequentialSummary] = {}

    def __call__(self, question: dict) -> dict:
        if question["kind"] != "look":
            return {"go": True}
        task, n_items = question["task"], int(question["n_items"])
        spec = next(t for t in self.config.tasks if t.name == task)
        paired = _pair(spec, read_output_dir(self.baseline_dir, [task]),
                       read_output_dir(self.candidate_dir, [task]), spec.filter,
                       str(self.candidate_dir), baseline_superset=True)
        try:
            summary = sequential_for_task(
                paired, item_order(n_items, self.config.seed, task),
                chunk=self.config.sequential.chunk, alpha=_look_alpha(self.config),
                margin=self.config.gate.margin, n_items=n_items)
        except ValueError as exc:  # e.g. a metric that is not 0/1
            return {"error": str(exc)}
        self.last[task] = summary
        return {"stop": summary.stopped_early, "decision": summary.decision,
                "items_used": summary.items_used}


def _arm_identity(spec: ArmSpec) -> tuple:
    return (spec.model_hash, spec.adapter_hash, spec.mode, json.dumps(spec.faults, sort_keys=True),
            json.dumps(spec.structured_output, sort_keys=True),
            json.dumps(spec.engine, sort_keys=True), json.dumps(spec.env, sort_keys=True))


def check_arms_differ(config: ABConfig, specs: dict[str, ArmSpec]) -> None:
    same = _arm_identity(specs["baseline"]) == _arm_identity(specs["candidate"])
    if same and not config.expect_identical_arms:
        raise UserError(f"{config.source}: arms.baseline and arms.candidate are identical (same "
                        "model, adapter, mode, faults, engine and env); set `expect_identical_arms: "
                        "true` for an A/A check, or change the candidate.")
    if not same and config.expect_identical_arms:
        raise UserError(f"{config.source}: `expect_identical_arms: true`, but the arms differ "
                        "in model, engine or env.")


def check_effective_configs(config: ABConfig, manifests: dict[str, dict]) -> None:
    effective = [manifests[a].get("effective_engine_config") for a in ARMS]
    models = [manifests[a].get("model_hash") for a in ARMS]
    if config.expect_identical_arms or None in effective or \
            config.arm("baseline").engine == config.arm("candidate").engine:
        return  # only a requested engine difference can be swallowed by vLLM
    if effective[0] == effective[1] and models[0] == models[1] and \
            config.arms.baseline.env == config.arms.candidate.env:
        raise UserError(f"{config.source}: the arms ask for different engine arguments, but vLLM "
                        "ran both with identical effective configs (it ignored or defaulted the "
                        "difference); the comparison would test nothing.")


def open_store(reports_dir: Path, store_root: Path | None = None):
    """The run store: --store, else $EVALS_STORE, else <reports>/store."""
    from evals.store import ENV_VAR, RunStore

    if store_root is None and not os.environ.get(ENV_VAR):
        store_root = Path(reports_dir) / "store"
    return RunStore(store_root)


def record_in_store(store, run_dir: Path, *, kind: str, deployment: str | None,
                    echo=print) -> None:
    """Finished work is never lost to a broken store: a store problem is a warning."""
    try:
        stored = store.record_run(run_dir, kind=kind, deployment=deployment)
        echo(f"[evals] recorded as {stored.run_id} in {store.root}")
    except UserError as exc:
        echo(f"warning: the run was not recorded in the run store: {exc}")


def _reuse(specs: dict[str, ArmSpec], store, echo) -> dict[str, dict[str, str]]:
    reused: dict[str, dict[str, str]] = {}
    for name, spec in specs.items():
        try:
            found = reuse_finished_tasks(spec, store.find_task_result)
        except UserError as exc:
            echo(f"warning: stored results not reused: {exc}")
            return reused
        if found:
            reused[name] = found
            for task, source in found.items():
                echo(f"[evals] {name}: {task} reused from {source} (same content key)")
    return reused


def _run_arms(config: ABConfig, specs: dict[str, ArmSpec], echo,
              answers: dict[str, Answerer] | None = None,
              audit: _AuditWhileStarting | None = None) -> tuple[dict, dict]:
    """Each arm in turn. The first arm's worker asks for a go before its first item (the
    audit runs while its engine starts); a stop is raised once that worker has exited,
    before any other arm starts."""
    layouts = {}
    for name in specs:
        answer = (answers or {}).get(name)
        if audit is not None and not layouts:
            answer = audit.answerer(answer)
        try:
            layouts[name] = run_arm(specs[name], echo=echo, answer=answer)
        except UserError as exc:
            raise UserError(f"{config.source}: {exc}") from None
        if audit is not None and len(layouts) == 1:
            audit.join()  # a stop raises here, before any other arm starts
    manifests = {name: layouts[name].read_manifest() for name in specs}
    for name in specs:
        manifests[name]["tasks"] = {t: layouts[name].task_record(t) for t in specs[name].tasks}
    return layouts, manifests


def _speed_records(layouts: dict[str, ArmLayout], specs: dict[str, ArmSpec]) -> dict:
    return {name: {t: SPEED_RECORD.read(layouts[name].speed_file(t))
                   for t in specs[name].tasks if layouts[name].speed_file(t).exists()}
            for name in layouts}


def preflight(config: ABConfig, echo=print) -> dict:
    """Before any arm starts: the model doctor. It stops the run with a UserError on errors;
    what it found goes into the summary."""
    report = diagnose_config(config)
    for line in report.lines():
        echo(line)
    report.check()
    return {"doctor": report.to_dict(), "warnings": report.warning_lines(), "resolved": {}}


def config_audit(config: ABConfig, specs: dict[str, ArmSpec], checks: dict, *,
                 allow_undeclared: bool = False, echo=print) -> None:
    """Both arms' effective engine configs, resolved without an engine, compared; a stop is
    a UserError. Adds what it found to `checks`."""
    recorded = None
    if all(arm_is_complete(specs[arm]) for arm in ARMS):  # e.g. both arms reused
        recorded = recorded_arms({arm: ArmLayout(Path(specs[arm].output_dir)).read_manifest()
                                  for arm in ARMS})
    resolved = recorded or resolve_arms({arm: specs[arm] for arm in ARMS})
    audit = audit_resolved(config, resolved, allow_undeclared=allow_undeclared)
    echo(audit.message())
    audit.check()
    checks["audit"] = audit.to_dict()
    checks["warnings"] += audit.warning_lines()
    checks["resolved"] = {arm: r.effective for arm, r in resolved.items()}


class _AuditWhileStarting:
    """The config audit in a thread while the first arm's engine starts: that arm's worker
    asks for a go before its first item (evals.runner.asks) and gets it only once the audit
    passed, so nothing is measured before it did, but its ~10 s of resolving overlap the
    engine start."""

    def __init__(self, job):
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(job,), daemon=True)
        self._thread.start()

    def _run(self, job) -> None:
        try:
            job()
        except BaseException as exc:  # raised in the main thread by join()
            self.error = exc

    def answerer(self, other: Answerer | None) -> Answerer:
        """Answers "go" when the audit has finished; passes other questions on."""
        def answer(question: dict) -> dict:
            if question["kind"] == "go":
                self._thread.join()
                return {"go": self.error is None}
            return other(question) if other else {}
        return answer

    def join(self) -> None:
        self._thread.join()
        if self.error is not None:
            raise self.error


def check_task_names(config: ABConfig) -> None:
    """Every task name resolves (bundled tasks, the include path, lm-eval's index) before
    any subprocess starts."""
    include = [str(DEFAULT_TASKS_DIR)] + ([config.include_path] if config.include_path else [])
    unknown = unknown_tasks([t.name for t in config.tasks], include)
    if unknown:
        name, close = unknown[0]
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UserError(f"{config.source}: lm-eval knows no task named {name!r} (searched "
                        f"lm-eval's tasks and {', '.join(include)}){hint}")


def check_fault_support(config: ABConfig) -> None:
    """Canary faults patch vLLM internals: refuse, before any engine starts, a vLLM version
    they were not written for."""
    if not any(config.arm(name).faults for name in ARMS):
        return
    problem = check_vllm_version(installed_vllm())
    if problem:
        raise UserError(f"{config.source}: faults cannot be injected: {problem}.")


def run_ab(config: ABConfig, reports_dir: Path = DEFAULT_REPORTS, fresh: bool = False,
           echo=print, store_root: Path | None = None,
           allow_undeclared: bool = False) -> tuple[ExitCode, Path]:
    check_local_models(config)
    check_fault_support(config)
    check_task_names(config)
    run_dir = Path(reports_dir) / run_id_for(config)
    specs = arm_specs(config, run_dir)
    check_arms_differ(config, specs)
    checks = preflight(config, echo=echo)
    store = open_store(reports_dir, store_root)
    if fresh:
        for spec in specs.values():
            for marker in ArmLayout(Path(spec.output_dir)).tasks_dir.glob("*.json"):
                marker.unlink()
    else:
        _reuse(specs, store, echo)
    echo(f"[evals] run {run_dir.name}: {len(config.tasks)} task(s), arms run one at a time")
    started = time.time()
    audit = _AuditWhileStarting(lambda: config_audit(
        config, specs, checks, allow_undeclared=allow_undeclared, echo=echo))
    looks = None
    if config.sequential:
        looks = Looks(config, ArmLayout(Path(specs["baseline"].output_dir)).lm_eval_dir,
                      ArmLayout(Path(specs["candidate"].output_dir)).lm_eval_dir)
    layouts, manifests = _run_arms(config, specs, echo, {"candidate": looks} if looks else None,
                                   audit)
    for name in ARMS:  # server arms: what the audit resolved, as `vllm serve` resolves it
        if manifests[name].get("effective_engine_config") is None and \
                checks["resolved"].get(name) is not None:
            manifests[name]["effective_engine_config"] = checks["resolved"][name]
            manifests[name]["effective_engine_config_source"] = "resolved before the run"
    check_effective_configs(config, manifests)
    exercise = assess(declared_optimizations(config.arm("baseline").engine,
                                             config.arm("candidate").engine),
                      {name: manifests[name] for name in ARMS},
                      {t.name: t.gate for t in config.tasks})
    tasks = [t.name for t in config.tasks]
    samples = {name: read_output_dir(layouts[name].lm_eval_dir, tasks) for name in specs}
    for name in ARMS:
        if specs[name].cache_stress:
            samples[name + WARM] = read_output_dir(layouts[name].warm_layout().lm_eval_dir, tasks)
    echo(f"[evals] both arms finished in {time.time() - started:.0f} s; analysing")
    sequential = None
    if config.sequential:
        sequential = {"chunk": config.sequential.chunk, "alpha": _look_alpha(config),
                      "n_items": {t: manifests["candidate"]["tasks"][t]["n_items"] for t in tasks},
                      "looks": looks.last}
    code = finish(kind="ab", run_dir=run_dir, tasks=list(config.tasks), gate=config.gate,
                  seed=config.seed, config_dump=json.loads(config.model_dump_json()),
                  samples=samples, manifests=manifests, echo=echo,
                  sequential=sequential, speed=_speed_records(layouts, specs), preflight=checks,
                  exercise=exercise)
    record_in_store(store, run_dir, kind="ab", deployment=deployment_name(config), echo=echo)
    return code, run_dir


def run_drift(config: ABConfig, reports_dir: Path = DEFAULT_REPORTS, echo=print,
              store_root: Path | None = None, run_id: str | None = None) -> tuple[ExitCode, Path]:
    """Reruns the deployment arm and compares it with the golden run (see evals.drift)."""
    check_local_models(config)
    check_fault_support(config)
    check_task_names(config)
    store = open_store(reports_dir, store_root)
    deployment = deployment_name(config)
    golden = store.golden(deployment)
    if golden is None:
        raise UserError(f"{config.source}: deployment `{deployment}` has no golden run in "
                        f"{store.root}; run `python -m evals ab {config.source}` (or a drift run) "
                        f"and pin it: `python -m evals pin RUN_ID --deployment {deployment}`.")
    checks = preflight(config, echo=echo)
    arm = config.drift.arm
    golden_dir = golden_arm_dir(golden.source_dir, arm, deployment)
    run_dir = Path(reports_dir) / (run_id or drift_run_id(run_id_for(config)))
    spec = replace(arm_specs(config, run_dir)[arm], arm="candidate",
                   output_dir=str(run_dir / "arms" / "candidate"), sequential=None)
    echo(f"[evals] drift run {run_dir.name}: deployment {deployment}, arm `{arm}` again vs "
         f"golden run {golden.run_id}")
    specs = {"candidate": spec}
    layouts, manifests = _run_arms(config, specs, echo)
    tasks = [t.name for t in config.tasks]
    golden_samples = read_output_dir(golden_dir, tasks)
    samples = {"baseline": golden_samples,
               "candidate": read_output_dir(layouts["candidate"].lm_eval_dir, tasks)}
    manifests["baseline"] = {"source": str(golden_dir), "golden_run": golden.run_id}
    history = history_points(store, deployment, tasks, exclude=run_dir.name)
    exercise = assess(declared_optimizations({}, config.arm(arm).engine),
                      {"candidate": manifests["candidate"]}, {t.name: t.gate for t in config.tasks})

    def chart(analyses, verdict):
        charts = chart_tasks(analyses, history, lam=config.drift.lam, L=config.drift.L,
                             run_id=run_dir.name)
        return apply_chart(verdict, charts), summary_extras(deployment, golden.run_id, arm,
                                                            charts)

    code = finish(kind=DRIFT_KIND, run_dir=run_dir, tasks=list(config.tasks), gate=config.gate,
                  seed=config.seed, config_dump=json.loads(config.model_dump_json()),
                  samples=samples, manifests=manifests, echo=echo, post_decide=chart,
                  preflight=checks, exercise=exercise)
    record_in_store(store, run_dir, kind=DRIFT_KIND, deployment=deployment, echo=echo)
    return code, run_dir


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


def run_compare(dir_a: Path, dir_b: Path, *, gate: GateConfig, seed: int = 1234,
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
    code = finish(kind="compare", run_dir=run_dir, tasks=tasks, gate=gate, seed=seed,
                  config_dump=config_dump, samples={"baseline": a, "candidate": b},
                  manifests=manifests, echo=echo,
                  preflight={"warnings": [f"baseline and candidate are the same directory "
                                          f"({dir_a}): this compares a run with itself"]}
                  if same_dir else None)
    record_in_store(open_store(reports_dir, store_root), run_dir, kind="compare",
                    deployment=deployment or f"{name}-{paths_key}", echo=echo)
    return code, run_dir


def finish(*, kind: str, run_dir: Path, tasks: list[TaskSpec], gate: GateConfig, seed: int,
           config_dump: dict, samples: dict[str, ArmSamples], manifests: dict[str, dict],
           echo=print, sequential: dict | None = None,
           speed: dict[str, dict] | None = None, post_decide=None,
           preflight: dict | None = None,
           exercise: ExerciseReport | None = None) -> ExitCode:
    """`post_decide(analyses, verdict) -> (verdict, extra summary keys)`: a last say on the
    verdict (drift: the control chart)."""
    paired: list[PairedTask] = []
    analyses: list[TaskAnalysis] = []
    warnings: list[str] = list((preflight or {}).get("warnings", []))
    cache_checks: list[WarmColdCheck] = []
    for spec in tasks:
        def pair(first: str, second: str, filter_name, spec=spec, **kwargs) -> PairedTask:
            return _pair(spec, samples[first], samples[second], filter_name, run_dir.name,
                         **kwargs)

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
        noise = None
        if RERUN in samples:
            rerun = pair_task(samples["baseline"], samples[RERUN], spec.name, spec.metric,
                              p.filter)  # both ran the full item set
            noise = noise_floor(rerun)
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
    verdict = decide(analyses, alpha=gate.alpha, margin=gate.margin, correction=gate.correction,
                     pooled=gate.pooled)
    speedup = None
    if speed:
        speedup = compare_speed(
            speed.get("baseline", {}), speed.get("candidate", {}),
            spec_decode={a: manifests.get(a, {}).get("spec_decode") for a in ARMS},
            rng=task_rng(seed, "speed"), confidence=1 - 2 * gate.alpha,
            min_speedup=gate.min_speedup)
        verdict = apply_speed_gate(verdict, speedup)
    if exercise is not None:
        verdict = apply_exercise_gate(verdict, exercise)
        warnings.extend(exercise.warnings)
    extras: dict = {}
    if post_decide is not None:
        verdict, extras = post_decide(analyses, verdict)
    summary = build_summary(
        kind=kind, run_id=run_dir.name, config=config_dump, analyses=analyses, verdict=verdict,
        arms=manifests, sources={name: s.source for name, s in samples.items()},
        warnings=warnings, speed=speedup, cache_stress=cache_checks)
    summary.update(extras)
    if exercise is not None:
        summary["exercise"] = exercise.to_dict()
    faults = {arm: m["faults"] for arm, m in manifests.items() if m.get("faults")}
    if faults:
        summary["faults"] = faults
    if preflight:
        summary["preflight"] = {k: v for k, v in preflight.items()
                                if k not in ("warnings", "resolved")}
    write_run(run_dir, summary, paired)
    from evals.report import write_reports  # rendering is the last step of the flow
    written = write_reports(run_dir)
    echo(render_table(summary))
    for warning in warnings:
        echo(visible(f"warning: {warning}"))
    echo(f"report: {written['html']}")
    return ExitCode(summary["exit_code"])
