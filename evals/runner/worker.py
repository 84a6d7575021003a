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
from evals.runner.layout import ArmLayout


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


def run(spec: ArmSpec) -> int:
    layout = ArmLayout(Path(spec.output_dir))
    pending = [t for t in spec.tasks if not layout.task_done(t, spec.key_for(t))]
    if not pending:
        say(spec, "all tasks already finished; nothing to run")
        return 0
    started = time.time()
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
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
        tracker = EvaluationTracker(output_path=str(layout.lm_eval_dir))
        results = simple_evaluate(
            model=lm, tasks=[task], limit=spec.limit, num_fewshot=spec.num_fewshot,
            log_samples=True, evaluation_tracker=tracker, task_manager=manager,
            random_seed=spec.seed, numpy_random_seed=spec.seed, torch_random_seed=spec.seed,
            fewshot_random_seed=spec.seed, bootstrap_iters=0)
        samples = results.pop("samples")
        tracker.save_results_aggregated(results=results, samples=samples)
        for name in results["configs"]:
            tracker.save_results_samples(task_name=name, samples=samples[name])
        seconds = time.time() - task_started
        layout.mark_task_done(task, {
            "task": task, "key": spec.key_for(task), "wall_seconds": round(seconds, 3),
            "generated_tokens": stats["generated_tokens"] - before["generated_tokens"],
            "requests": stats["requests"] - before["requests"],
            "n_samples": {k: len(v) for k, v in samples.items()},
            "task_hashes": results.get("task_hashes", {}),
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
