"""Baseline reuse: a finished task of an earlier run stands in for a new run of it when the
content keys agree.

The key (`ArmSpec.key_for`) hashes the model files, the engine arguments, the environment,
the task and its settings, the seed, the limit and the lm-eval / vLLM / torch / transformers
versions; the run store indexes the key of every recorded arm task. A hit copies that
task's lm-eval output (samples and results file), its speed record and its done-marker
into the new arm, so the runner skips it; the marker says where it came from, and the
summary lists it. `--fresh` turns reuse off.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from evals.plan.arm_spec import ArmSpec
from evals.runner.layout import ArmLayout


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
    if source.logprobs_file(task).exists():  # `logprobs: k` is part of the key
        target.logprobs_file(task).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source.logprobs_file(task), target.logprobs_file(task))
    warm_files = _task_outputs(source.warm_layout(), task)
    for path in warm_files:
        destination = target.warm_layout().lm_eval_dir / path.relative_to(
            source.warm_layout().lm_eval_dir)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
    return True


def reuse_finished_tasks(spec: ArmSpec, find_task_result) -> dict[str, str]:
    """Copies stored results for the arm's unfinished tasks whose key a stored arm has.

    `find_task_result(key) -> Path | None` is the run store's lookup. Returns
    {task: source arm directory} for the tasks reused."""
    target = ArmLayout(Path(spec.output_dir))
    reused: dict[str, str] = {}
    for task in spec.tasks:
        key = spec.key_for(task)
        if target.task_done(task, key):
            continue
        found = find_task_result(key)
        if found is None or Path(found).resolve() == target.root.resolve():
            continue
        source = ArmLayout(Path(found))
        if not source.task_done(task, key) or not _copy_task(source, target, task):
            continue  # the stored arm changed or lost its files since it was recorded
        record = dict(source.task_record(task), reused_from=str(source.root))
        target.mark_task_done(task, record)
        if not target.manifest_path.exists() and source.manifest_path.exists():
            target.write_manifest({**source.read_manifest(), "reused_from": str(source.root)})
        reused[task] = str(source.root)
    return reused
