"""The run stage, parent side: the arms' specs from a config, results reused from the run
store, each arm run through the runner (evals.runner.launch) with the answers the pipeline
gives its workers (a sequential candidate's "stop now?" is evals.analyse.early_stop.Looks).
What comes out is each arm's layout on disk and its manifest; pairing and analysis come
after.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from evals.plan.arm_spec import ArmSpec, package_versions
from evals.plan.config import DEFAULT_TASKS_DIR, ABConfig
from evals.plan.arm_env import arm_env
from evals.plan.decoding import arm_sampling
from evals.plan.run_plan import RunPlan
from evals.plan.study import Study
from evals.errors import UserError
from evals.paths import ARMS
from evals.schemas import SPEED_RECORD
from evals.dispatch.arm_origins import RERUN
from evals.dispatch.reuse import reuse_finished_tasks, reuse_recorded_sweep
from evals.runner.asks import Answerer
from evals.runner.launch import arm_is_complete, run_arms_in_turn
from evals.runner.layout import ArmLayout
from evals.runner.task_fingerprint import task_inputs
from evals.plan.schedule import sequential_alpha


def run_id_for(config: ABConfig) -> str:
    blob = config.model_dump_json(exclude={"source", "description"}).encode()
    return f"{config.name}-{hashlib.sha256(blob).hexdigest()[:8]}"


def number_replicates(specs: dict[str, ArmSpec]) -> dict[str, ArmSpec]:
    """Arms of one config (same keys but for `replicate`) numbered in order: the first (the
    baseline) is replicate 0, an A/A's candidate and the noise-floor rerun further ones, so
    no two of them can share stored results."""
    seen: dict[str, int] = {}
    out = {}
    for name, spec in specs.items():
        plain = replace(spec, replicate=0)
        same = json.dumps([plain.key_for(t) for t in spec.tasks])
        out[name] = replace(spec, replicate=seen.get(same, 0))
        seen[same] = seen.get(same, 0) + 1
    return out


def load_sweep_settings(config: ABConfig) -> dict | None:
    """What a server arm's worker needs for the config's load sweep (`speed:`), or None."""
    speed = config.speed
    if speed is None:
        return None
    prompts = speed.prompts
    return {"levels": list(speed.concurrency), "requests_per_level": speed.requests_per_level,
            "prompts": prompts if isinstance(prompts, str) else prompts.model_dump(),
            "output_tokens": speed.tokens_per_request(),
            "request_timeout_s": speed.request_timeout_s,
            "level_timeout_s": speed.level_timeout_s, "on_reuse": speed.on_reuse}


def arm_specs(config: ABConfig, run_dir: Path) -> dict[str, ArmSpec]:
    include = [str(DEFAULT_TASKS_DIR)] + ([config.include_path] if config.include_path else [])
    versions = package_versions()
    names = [t.name for t in config.tasks]
    inputs: dict[str, dict] = {}  # by the arm's environment (a hub cache it may name)
    specs = {}
    for name in ARMS:
        arm = config.arm(name)
        env_key = json.dumps(dict(arm.env), sort_keys=True)
        if env_key not in inputs:
            inputs[env_key] = task_inputs(names, include, dict(arm.env))
        env = arm_env(config, name)  # secrets as markers; their values beside, never written
        specs[name] = ArmSpec(
            arm=name, model=config.arm_model(name), engine=dict(arm.engine), env=env.recorded,
            secret_env=env.secrets, tasks=tuple(t.name for t in config.tasks), limit=config.limit,
            num_fewshot=config.num_fewshot, seed=config.seed, include_paths=tuple(include),
            output_dir=str(run_dir / "arms" / name), versions=versions, mode=arm.mode,
            serving={"concurrency": arm.concurrency, "base_url": arm.base_url,
                     "api_key_env": arm.api_key_env,
                     "served_model_name": arm.served_model_name},
            cache_stress=arm.cache_stress, lora_adapter=arm.lora_adapter,
            structured_output=arm.structured_output,
            faults=tuple(f.model_dump() for f in arm.faults),
            logprobs=config.logprobs, task_inputs=inputs[env_key],
            sampling=arm_sampling(config, name),
            load_sweep=load_sweep_settings(config)).with_fingerprint()
    if config.sequential:
        chunk = config.sequential.chunk
        specs["baseline"] = replace(specs["baseline"], sequential={"chunk": chunk})
        specs["candidate"] = replace(specs["candidate"], sequential={
            "chunk": chunk, "look": True, "stop_rule": [
                sequential_alpha(config), config.gate.margin,
                {t.name: [t.metric, t.filter] for t in config.tasks}]})
    if config.noise_floor:
        specs[RERUN] = replace(specs["baseline"], arm=RERUN,
                               output_dir=str(run_dir / "arms" / RERUN))
    return number_replicates(specs)



def study_specs(study: Study, run_dir: Path) -> dict:
    """Every arm's spec, the baseline first; each arm runs once, into `arms/<arm>/`."""
    specs = {}
    for arm, comparison in study.comparisons.items():
        pair = arm_specs(comparison, run_dir)
        if not specs:
            specs[study.baseline] = replace(pair["baseline"], arm=study.baseline,
                                            output_dir=str(run_dir / "arms" / study.baseline))
        specs[arm] = replace(pair["candidate"], arm=arm, output_dir=str(run_dir / "arms" / arm))
    return number_replicates(specs)

def forget_damaged(specs: dict[str, ArmSpec], echo) -> None:
    """A finished task whose samples file is damaged (cut short, a broken line) loses its
    done-marker, so reuse or its worker runs it again."""
    for name, spec in specs.items():
        layout = ArmLayout(Path(spec.output_dir))
        for task in spec.tasks:
            try:
                record = layout.task_record(task) if layout.task_marker(task).exists() else None
            except UserError:
                continue  # an unreadable marker is not trusted anyway
            problem = layout.damaged_output(record) if record else None
            if problem:
                echo(f"[evals] {name}: {task} was finished, but {problem}; "
                     "it is not trusted and runs again")
                layout.task_marker(task).unlink()


def reuse_from_store(specs: dict[str, ArmSpec], store, echo) -> dict[str, dict[str, dict]]:
    """Copies every task result the run store holds under the same content key into the
    arms' directories (evals.dispatch.reuse), the replicates of one config together from one
    earlier run; a broken store is a warning, never a failure."""
    groups: dict[str, list[ArmSpec]] = {}
    for spec in specs.values():
        plain = replace(spec, replicate=0)
        groups.setdefault(json.dumps([plain.key_for(t) for t in spec.tasks]), []).append(spec)
    reused: dict[str, dict[str, dict]] = {}
    for group in groups.values():
        try:
            found = reuse_finished_tasks(group, store.task_result_sources)
        except UserError as exc:
            echo(f"warning: stored results not reused: {exc}")
            return reused
        reused.update(found)
    for name in specs:
        for task, record in reused.get(name, {}).items():
            echo(f"[evals] {name}: {task} reused from {record['reused_from']} (run "
                 f"{record['reused_run']}; {record['reuse_reason']})")
        sweep = reuse_recorded_sweep(specs[name], reused.get(name, {}))
        if sweep is not None:
            echo(f"[evals] {name}: load sweep reused from {sweep['reused_from']} (run "
                 f"{sweep['reused_run']}; the same server and sweep settings)")
        elif reused.get(name) and ArmLayout(Path(specs[name].output_dir)).sweep_due(specs[name]):
            echo(f"[evals] {name}: load sweep runs again on its own server (speed.on_reuse: "
                 f"{specs[name].load_sweep.get('on_reuse', 'recorded')}; no recorded sweep "
                 "with these settings is used)")
    return reused


def fresh_or_reused(specs: dict[str, ArmSpec], store, fresh: bool, echo) -> None:
    """`--fresh`: the arms' finished tasks are forgotten (they run again); otherwise a
    damaged finished task is forgotten, and what the run store holds under the same
    content key is reused."""
    if fresh:
        for spec in specs.values():
            for marker in ArmLayout(Path(spec.output_dir)).tasks_dir.glob("*.json"):
                marker.unlink()
    else:
        forget_damaged(specs, echo)
        reuse_from_store(specs, store, echo)


def run_arms(config: ABConfig | RunPlan, specs: dict[str, ArmSpec], echo,
             answers: dict[str, Answerer] | None = None,
             audit=None, in_workers=None) -> tuple[dict, dict]:
    """Each arm in turn (evals.runner.launch.run_arms_in_turn). The first arm that runs
    (not reused) asks for a go before its first item (the audit runs while its engine
    starts); a stop is raised once that worker has exited, before any other arm builds its
    engine. `in_workers` (evals.dispatch.config_audit.ResolvedInWorkers) answers the workers that
    resolve configs for the audit; the audit may wait for them, so it is joined only after
    the first arm that runs, never before. `config` (or the run's plan) names the config file
    in a worker's bad-input message."""
    answers = dict(answers or {})
    if in_workers is not None:
        answers = {name: in_workers.answerer(name, answers.get(name)) for name in specs}
    first = next((name for name, spec in specs.items() if not arm_is_complete(spec)), None)
    if audit is not None and first is not None:
        answers[first] = audit.answerer(answers.get(first))

    def after_arm(name: str) -> None:
        if audit is not None and name == first:
            audit.join()  # a stop raises here

    try:
        layouts = run_arms_in_turn(specs, echo=echo, answers=answers, after_arm=after_arm)
    except UserError as exc:
        if audit is not None and exc is audit.error:
            raise  # the audit's stop names its config itself
        raise UserError(f"{config.source}: {exc}") from None  # a worker's bad input
    return layouts, manifests_of(layouts, specs)


def manifests_of(layouts: dict[str, ArmLayout], specs: dict[str, ArmSpec]) -> dict:
    """Each finished arm's manifest with its tasks' records; each record says whether the
    task ran here or was reused (`outcome`), and where its engine run was (`ran_in`)."""
    manifests = {}
    for name, layout in layouts.items():
        manifests[name] = layout.read_manifest()
        manifests[name]["replicate"] = specs[name].replicate
        tasks = {}
        for task in specs[name].tasks:
            record = layout.task_record(task)
            reused = bool(record.get("reused_from"))
            tasks[task] = {**record, "outcome": "reused" if reused else "ran",
                           "ran_in": record.get("ran_in") or str(layout.root)}
        manifests[name]["tasks"] = tasks
    return manifests


def run_arms_on_ray(specs: dict[str, ArmSpec], echo, executor) -> tuple[dict, dict, dict]:
    """The arms as Ray tasks (evals.dispatch.ray_executor); a failed arm fails the run (exit 4)
    after the others finished, and a rerun resumes it."""
    from evals.errors import RunFailed
    from evals.dispatch.ray_executor import submit_arms

    dirs, failed, record = submit_arms(specs, address=executor.address,
                                       parallel=executor.parallel, echo=echo,
                                       shard_tasks=executor.shard_tasks)
    if failed:
        raise RunFailed("; ".join(failed.values()))
    layouts = {name: ArmLayout(path) for name, path in dirs.items()}
    return layouts, manifests_of(layouts, specs), record


def speed_records(layouts: dict[str, ArmLayout], specs: dict[str, ArmSpec]) -> dict:
    return {name: {t: SPEED_RECORD.read(layouts[name].speed_file(t))
                   for t in specs[name].tasks if layouts[name].speed_file(t).exists()}
            for name in layouts}

