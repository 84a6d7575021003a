"""Reuse from the run store: a finished task of an earlier run stands in for a new run of it
when the content keys agree.

The key (`ArmSpec.key_for`, what it covers: `evals.plan.arm_spec.KEY_COVERS`) hashes the
model files, the engine arguments, the environment, the task's resolved config and files,
the seed, the limit, the replicate index and the software versions; the run store indexes
the key of every recorded arm task. A hit copies that task's lm-eval output (samples and
results file), its speed record and its done-marker into the new arm, so the runner skips
it; the marker says from which run and arm it came, where it first ran and why the key
matched, and the summary lists it. Replicates of one config (an A/A's candidate, the
noise-floor rerun) are reused together from one earlier run only, each from its own
replicate there. `--fresh` turns reuse off.

A server arm of a config with `speed:` whose every task was reused gets the load sweep
recorded with them (`speed.on_reuse: recorded`, the default) when that run swept with the
same settings; the copy says so (`origin: reused`, the run and arm folder it came from).
Otherwise (`on_reuse: rerun`, or no such sweep) its worker starts the server for the sweep
alone (`origin: rerun`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from evals.errors import UserError
from evals.plan.arm_spec import ArmSpec
from evals.schemas import LOAD_SWEEP
from evals.runner.layout import ArmLayout, sweep_path, sweep_settings


def _task_outputs(layout: ArmLayout, task: str) -> list[Path]:
    """The newest samples file of `task` and the results file written with it."""
    samples = sorted(layout.lm_eval_dir.rglob(f"samples_{task}_*.jsonl"),
                     key=lambda p: p.name)
    if not samples:
        return []
    newest = samples[-1]
    stamp = newest.name.removeprefix(f"samples_{task}_").removesuffix(".jsonl")
    results = newest.parent / f"results_{stamp}.json"
    return [newest] + ([results] if results.exists() else [])


def _copy_task(source: ArmLayout, target: ArmLayout, task: str) -> bool:
    files = _task_outputs(source, task)
    if not files:
        return False
    for old in target.lm_eval_dir.rglob(f"samples_{task}_*.jsonl"):
        old.unlink()  # a partial earlier attempt must not shadow the copy
    for path in files:
        destination = target.lm_eval_dir / path.relative_to(source.lm_eval_dir)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
    if source.speed_file(task).exists():
        target.speed_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source.speed_file(task), target.speed_file(task))
    for kept in (source.logprobs_file(task), source.repeats_file(task)):
        if kept.exists():  # `logprobs: k` and `repeats: k` are part of the key
            copied = target.root / kept.relative_to(source.root)
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(kept, copied)
    warm_files = _task_outputs(source.warm_layout(), task)
    for path in warm_files:
        destination = target.warm_layout().lm_eval_dir / path.relative_to(
            source.warm_layout().lm_eval_dir)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
    return True


def _origin(record: dict, source: ArmLayout) -> str:
    """Where a stored task's results were produced by an engine (a reused one's source)."""
    return str(record.get("ran_in") or record.get("reused_from") or source.root)


def reason(spec: ArmSpec, task: str) -> str:
    """Why a reused task's key matched, in words."""
    inputs = spec.task_inputs.get(task) or {}
    shown = ", ".join(f"{k} {v}" for k, v in inputs.items()) or "unknown"
    return (f"same content key {spec.key_for(task)}: model files {spec.model_hash or '-'}, "
            f"task inputs ({shown}), engine arguments, environment, limit, seed, versions, "
            f"replicate {spec.replicate}")


def reuse_finished_tasks(specs: list[ArmSpec], sources) -> dict[str, dict[str, dict]]:
    """Copies stored results for the arms' unfinished tasks whose key a stored arm has.

    `specs` are the replicates of one config (their keys differ only in `replicate`);
    `sources(key) -> [(run id, arm directory), ...]` is the run store's lookup, the most
    recent first. Per task the replicates not yet done here are reused from one earlier
    run: the most recent that holds most of them. Returns {arm: {task: marker record}}."""
    reused: dict[str, dict[str, dict]] = {}
    for task in dict.fromkeys(t for spec in specs for t in spec.tasks):
        hits: dict[str, dict[str, Path]] = {}  # arm -> run id -> its directory
        order: list[str] = []
        for spec in specs:
            target = ArmLayout(Path(spec.output_dir))
            key = spec.key_for(task)
            if task not in spec.tasks or target.task_done(task, key):
                continue
            for run_id, found in sources(key):
                source = ArmLayout(Path(found))
                if source.root.resolve() != target.root.resolve() and \
                        source.task_done(task, key):
                    hits.setdefault(spec.arm, {}).setdefault(run_id, source.root)
                    order += [run_id] if run_id not in order else []
        if not hits:
            continue
        chosen = max(order, key=lambda r: (sum(r in h for h in hits.values()), -order.index(r)))
        for spec in specs:
            found = hits.get(spec.arm, {}).get(chosen)
            target = ArmLayout(Path(spec.output_dir))
            if found is None:
                continue
            source = ArmLayout(found)
            if not _copy_task(source, target, task):
                continue  # the stored arm lost its files since it was recorded
            stored = source.task_record(task)
            record = dict(stored, reused_from=str(source.root), reused_run=chosen,
                          ran_in=_origin(stored, source), reuse_reason=reason(spec, task))
            target.mark_task_done(task, record)
            if not target.manifest_path.exists() and source.manifest_path.exists():
                target.write_manifest({**source.read_manifest(),
                                       "reused_from": str(source.root)})
            reused.setdefault(spec.arm, {})[task] = record
    return reused


def reuse_recorded_sweep(spec: ArmSpec, reused: dict[str, dict]) -> dict | None:
    """Copies the load sweep recorded with a server arm's reused tasks into the arm (each
    task's marker record in `reused` names its source arm), when every task is done here,
    the config asks for it (`on_reuse: recorded`) and that sweep has the same settings and
    measured something. Returns the copied record, or None (the worker then sweeps)."""
    target = ArmLayout(Path(spec.output_dir))
    if not target.sweep_due(spec) or spec.load_sweep.get("on_reuse", "recorded") != "recorded" \
            or not all(target.task_done(t, spec.key_for(t)) for t in spec.tasks):
        return None
    wanted = sweep_settings(spec.load_sweep)
    for record in reused.values():
        source = Path(record["reused_from"])
        try:
            raw = LOAD_SWEEP.read(sweep_path(source)) if sweep_path(source).exists() else None
        except UserError:
            continue  # a damaged sweep is not reused; the worker sweeps again
        if not raw or raw.get("error") or not raw.get("results") or \
                raw.get("settings") != wanted:
            continue
        copied = {**raw, "origin": "reused", "reused_from": str(source),
                  "reused_run": record.get("reused_run"),
                  # where the sweep itself ran (a reused one's own source)
                  "recorded_in": raw.get("recorded_in") or str(source)}
        LOAD_SWEEP.write(sweep_path(target.root), copied)
        return copied
    return None
