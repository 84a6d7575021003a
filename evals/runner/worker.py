"""Runs one arm in its own process: one vLLM engine, lm-eval tasks one after another.

`python -m evals.runner.worker SPEC.json`. Writes lm-eval's own output layout under
`<arm>/lm_eval/`, a done-marker per finished task under `<arm>/tasks/` (so a rerun
after a crash resumes), and `<arm>/manifest.json` with the engine configuration
vLLM actually used. Progress lines go to stdout with the prefix `[evals]`.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from tqdm import tqdm

from evals.arm_spec import ArmSpec
from evals.runner.effective_config import effective_engine_config
from evals.runner.launch import BAD_INPUT_PREFIX
from evals.pairing import pair_task
from evals.runner.chunk_merge import merge_chunk_samples
from evals.runner.layout import ArmLayout
from evals.samples import read_output_dir
from evals.sequential_plan import chunks, item_order, sequential_for_task


def say(spec: ArmSpec, message: str) -> None:
    print(f"[evals] {spec.arm}: {message}", flush=True)


class ProgressLines(tqdm):
    """vLLM's progress bar, printed as `[evals]` lines (items done of total) every 5 s."""

    label = ""
    _shown = -1

    def __init__(self, *args, **kwargs):
        kwargs.update(file=sys.stdout, mininterval=5.0, leave=False)
        super().__init__(*args, **kwargs)

    def display(self, msg=None, pos=None):
        desc = str(self.desc or "")
        if self.total and "Processed" in desc and self.n != self._shown:
            self._shown = self.n
            print(f"[evals] {self.label}: {self.n}/{self.total} requests, "
                  f"{self.format_dict['elapsed']:.0f} s elapsed", flush=True)
        return True


def _instrument(llm, stats: dict) -> None:
    """Counts generated tokens and finish reasons; swaps vLLM's tqdm for progress lines."""
    original = llm.generate

    def generate(*args, **kwargs):
        if kwargs.get("use_tqdm"):
            kwargs["use_tqdm"] = ProgressLines
        outputs = original(*args, **kwargs)
        for out in outputs:
            for completion in out.outputs:
                stats["generated_tokens"] += len(completion.token_ids)
                reason = str(completion.finish_reason)
                stats["finish_reasons"][reason] = stats["finish_reasons"].get(reason, 0) + 1
            stats["requests"] += 1
        return outputs

    llm.generate = generate


def _spec_decode_counters(llm) -> dict:
    """Accepted / drafted token counters from vLLM's metrics, where it reports them."""
    counters: dict[str, float] = {}
    try:
        for metric in llm.get_metrics():
            if metric.name.startswith("vllm:spec_decode") and hasattr(metric, "value"):
                counters[metric.name] = counters.get(metric.name, 0.0) + float(metric.value)
    except Exception:  # metrics are optional; a missing collector must not fail the arm
        return {}
    return counters


def _evaluate(spec: ArmSpec, lm, manager, task: str, output_dir: Path,
              indices: list[int] | None = None) -> tuple[dict, dict]:
    """One lm-eval run of one task (all items, the limit, or the given item indices),
    saved in lm-eval's own layout under output_dir."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(output_dir))
    results = simple_evaluate(
        model=lm, tasks=[task], limit=None if indices is not None else spec.limit,
        samples=None if indices is None else {task: indices},
        num_fewshot=spec.num_fewshot, log_samples=True, evaluation_tracker=tracker,
        task_manager=manager, random_seed=spec.seed, numpy_random_seed=spec.seed,
        torch_random_seed=spec.seed, fewshot_random_seed=spec.seed, bootstrap_iters=0)
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    return results, samples


def _task_size(manager, task: str, limit: int | None) -> int:
    from lm_eval.tasks import get_task_dict

    task_obj = get_task_dict([task], manager).get(task)
    if task_obj is None or not hasattr(task_obj, "eval_docs"):
        raise SystemExit(f"{BAD_INPUT_PREFIX}sequential early stop needs plain tasks; `{task}` "
                         "is a group of tasks - list its subtasks instead.")
    n = len(task_obj.eval_docs)
    return min(n, limit) if limit else n


def _run_chunked(spec: ArmSpec, layout: ArmLayout, lm, manager, task: str) -> dict:
    """Runs a task's items in the seeded order, chunk by chunk; the candidate looks after
    each chunk and stops once the sequential test decides (evals.sequential_plan)."""
    seq = spec.sequential
    n_items = _task_size(manager, task, spec.limit)
    order = item_order(n_items, spec.seed, task)
    parts = chunks(order, seq["chunk"])
    summary = None
    for k, part in enumerate(parts):
        chunk_dir = layout.chunk_dir(task, k)
        if not layout.chunk_done(chunk_dir):
            _evaluate(spec, lm, manager, task, chunk_dir, sorted(int(i) for i in part))
            layout.mark_chunk_done(chunk_dir, len(part))
        merge_chunk_samples(layout, task, k + 1)
        if seq.get("reference"):
            summary = _look(spec, layout, task, order, n_items)
            say(spec, f"{task}: look {k + 1} at {summary.items_used} of {n_items} items: "
                      f"{summary.decision}")
            if summary.stopped_early:
                break
    record = {"n_items": n_items, "chunks_run": k + 1,
              "items_run": int(sum(len(p) for p in parts[:k + 1]))}
    if summary is not None:
        record["sequential"] = {"decision": summary.decision, "items_used": summary.items_used}
    return record


def _look(spec: ArmSpec, layout: ArmLayout, task: str, order, n_items: int):
    seq = spec.sequential
    metric, filter_name = seq["metrics"][task]
    paired = pair_task(read_output_dir(seq["reference"], [task]),
                       read_output_dir(layout.lm_eval_dir, [task]), task, metric, filter_name,
                       baseline_superset=True)
    try:
        return sequential_for_task(paired, order, chunk=seq["chunk"], alpha=seq["alpha"],
                                   margin=seq["margin"], n_items=n_items)
    except ValueError as exc:  # e.g. a metric that is not 0/1
        raise SystemExit(f"{BAD_INPUT_PREFIX}{exc}") from None


def run(spec: ArmSpec) -> int:
    layout = ArmLayout(Path(spec.output_dir))
    pending = [t for t in spec.tasks if not layout.task_done(t, spec.key_for(t))]
    if not pending:
        say(spec, "all tasks already finished; nothing to run")
        return 0
    started = time.time()
    from lm_eval.models.vllm_causallms import VLLM
    from lm_eval.tasks import TaskManager

    logging.getLogger("lm-eval").setLevel(logging.WARNING)
    manager = TaskManager(include_path=list(spec.include_paths) or None)
    unknown = [t for t in pending if t not in manager.all_tasks]
    if unknown:
        # checked before the engine starts: a typo must not cost an engine start
        print(f"{BAD_INPUT_PREFIX}lm-eval knows no task named {', '.join(map(repr, unknown))} "
              f"(searched lm-eval's tasks and {', '.join(spec.include_paths)}).", flush=True)
        return 2
    say(spec, f"starting vLLM engine for {spec.model}")
    engine = dict(spec.engine)
    engine.setdefault("disable_log_stats", False)
    lm = VLLM(pretrained=spec.model, seed=spec.seed, batch_size="auto", **engine)
    engine_seconds = time.time() - started
    say(spec, f"engine ready in {engine_seconds:.0f} s")
    stats = {"generated_tokens": 0, "requests": 0, "finish_reasons": {}}
    _instrument(lm.model, stats)
    layout.write_manifest({
        "arm": spec.arm,
        "effective_engine_config": effective_engine_config(lm.model),
        "requested_engine_args": spec.engine,
        "versions": spec.versions,
        "model": spec.model,
        "model_hash": spec.model_hash,
        "engine_start_seconds": round(engine_seconds, 3),
    })
    for index, task in enumerate(pending, 1):
        task_started = time.time()
        ProgressLines.label = f"{spec.arm}: {task}"
        say(spec, f"task {index}/{len(pending)} {task} started")
        before = {"generated_tokens": stats["generated_tokens"], "requests": stats["requests"]}
        if spec.sequential:
            record = _run_chunked(spec, layout, lm, manager, task)
        else:
            results, samples = _evaluate(spec, lm, manager, task, layout.lm_eval_dir)
            record = {"n_samples": {k: len(v) for k, v in samples.items()},
                      "task_hashes": results.get("task_hashes", {})}
        seconds = time.time() - task_started
        layout.mark_task_done(task, {
            "task": task, "key": spec.key_for(task), "wall_seconds": round(seconds, 3),
            "generated_tokens": stats["generated_tokens"] - before["generated_tokens"],
            "requests": stats["requests"] - before["requests"], **record,
        })
        say(spec, f"task {index}/{len(pending)} {task} done in {seconds:.0f} s")
    manifest = layout.read_manifest()
    manifest.update({
        "generation": stats,
        "spec_decode": _spec_decode_counters(lm.model),
        "wall_seconds_last_run": round(time.time() - started, 3),
    })
    layout.write_manifest(manifest)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m evals.runner.worker SPEC.json", file=sys.stderr)
        return 2
    return run(ArmSpec.read(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
