"""Runs one arm in its own process: one model (an offline vLLM engine, `vllm serve`, an
endpoint or Transformers; see evals.runner.backends), lm-eval tasks one after another.

`python -m evals.runner.worker SPEC.json`. Writes lm-eval's own output layout under
`<arm>/lm_eval/`, a done-marker per finished task under `<arm>/tasks/` (so a rerun
after a crash resumes), and `<arm>/manifest.json` with the engine configuration
vLLM actually used. Progress lines go to stdout with the prefix `[evals]`.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from tqdm import tqdm

from evals.hardware import probe
from evals.plan.arm_spec import ArmSpec
from evals.schemas import SPEED_RECORD
from evals.runner.backends import import_backend, open_backend
from evals.runner.asks import (ENGINE_TURN, GO, LOOK, MODEL_READY, RELEASE, RESOLVE, RESOLVED,
                               ask)
from evals.plan.engine_workarounds import ENGINE_WORKAROUNDS, names_in_env
from evals.runner.launch import BAD_INPUT_PREFIX
from evals.runner.vllm_compat import workaround_problem
from evals.runner.chunk_merge import merge_chunk_samples
from evals.runner.config_resolver import engine_arg_names, resolve_report
from evals.runner.model_inspection import inspect_in_forks
from evals.runner.engine_lock import EngineLock
from evals.runner.fork_server import FORKED_ENV
from evals.runner.layout import ArmLayout, samples_files, sweep_settings
from evals.runner.load_sweep import write_sweep_error
from evals.runner.lm_eval_env import cache_env_info
from evals.runner.logprob_capture import write_rows
from evals.runner.process_cleanup import resource_tracker, stop_processes
from evals.runner.prompt_settings import prompt_settings, sampling_record
from evals.runner.repeat_scores import (merge_repeat_scores, tasks_with_repeats,
                                         write_repeat_scores)
from evals.runner.server import ServerFailed
from evals.runner.task_index import task_manager
from evals.runner.waves import (fresh_waves, group_waves, indexed_without_waves, mark_fresh,
                                wave_field)
from evals.plan.schedule import chunks, item_order


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


def _evaluate(spec: ArmSpec, lm, manager, task: str, output_dir: Path,
              indices: list[int] | None = None,
              repeats_file: Path | None = None) -> tuple[dict, dict]:
    """One lm-eval run of one task (all items, the limit, or the given item indices),
    saved in lm-eval's own layout under output_dir; the arm's chat template, system prompt
    and decoding settings applied, and with `repeats: k` every repeat's score written to
    `repeats_file` (evals.runner.repeat_scores)."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(output_dir))
    repeats = int((spec.sampling or {}).get("repeats", 1))
    with tasks_with_repeats(manager, repeats) as loaded:
        results = simple_evaluate(
            model=lm, tasks=[task], limit=None if indices is not None else spec.limit,
            samples=None if indices is None else {task: indices},
            num_fewshot=spec.num_fewshot, log_samples=True, evaluation_tracker=tracker,
            task_manager=manager, random_seed=spec.seed, numpy_random_seed=spec.seed,
            torch_random_seed=spec.seed, fewshot_random_seed=spec.seed, bootstrap_iters=0,
            **prompt_settings(spec.sampling))
    if repeats_file is not None and repeats > 1 and task in loaded:
        write_repeat_scores(repeats_file, task, loaded[task], indices)
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


def _keep_logprobs(capture, layout: ArmLayout, task: str, *, append: bool) -> None:
    """The task's captured top-k log-probabilities beside its samples (`logprobs: k`)."""
    if capture is None:
        return
    rows = capture.take(task)
    if rows or not append:
        write_rows(layout.logprobs_file(task), task, capture.top_k, rows, append=append)


def _run_chunked(spec: ArmSpec, layout: ArmLayout, lm, manager, task: str,
                 capture=None) -> dict:
    """Runs a task's items in the seeded order, chunk by chunk; the candidate asks the parent
    after each chunk whether the sequential test has decided (evals.analyse.early_stop), and
    stops when it has."""
    seq = spec.sequential
    n_items = _task_size(manager, task, spec.limit)
    order = item_order(n_items, spec.seed, task)
    parts = chunks(order, seq["chunk"])
    answer = None
    for k, part in enumerate(parts):
        chunk_dir = layout.chunk_dir(task, k)
        if not layout.chunk_done(chunk_dir):
            _evaluate(spec, lm, manager, task, chunk_dir, sorted(int(i) for i in part))
            _keep_logprobs(capture, layout, task, append=k > 0)
            layout.mark_chunk_done(chunk_dir, len(part))
        merge_chunk_samples(layout, task, k + 1)
        if seq.get("look"):
            answer = ask({"kind": LOOK, "task": task, "chunks": k + 1, "n_items": n_items})
            if answer is None:
                continue
            if answer.get("error"):
                raise SystemExit(f"{BAD_INPUT_PREFIX}{answer['error']}")
            say(spec, f"{task}: look {k + 1} at {answer['items_used']} of {n_items} items: "
                      f"{answer['decision']}")
            if answer["stop"]:
                break
    record = {"n_items": n_items, "chunks_run": k + 1,
              "items_run": int(sum(len(p) for p in parts[:k + 1]))}
    if answer is not None:
        record["sequential"] = {"decision": answer["decision"],
                                "items_used": answer["items_used"]}
    return record


def _waves(manager, task: str, limit: int | None) -> list[tuple[list[int], bool]] | None:
    """The task's item indices per wave and whether the wave starts fresh (no earlier wave
    shares its prefix: evals.runner.waves), or None for a plain task."""
    from lm_eval.tasks import get_task_dict

    if indexed_without_waves(manager, task):
        return None
    task_obj = get_task_dict([task], manager).get(task)
    field = wave_field(task_obj)
    if field is None:
        return None
    docs = list(task_obj.eval_docs)
    try:
        groups = group_waves(docs, field, limit, task)
    except ValueError as exc:
        raise SystemExit(f"{BAD_INPUT_PREFIX}{exc}") from None
    return mark_fresh(groups, docs, field, fresh_waves(task_obj))


WAVE_REPEATS = "repeats.json"
"""A wave's repeat scores, in its chunk folder (merged by _run_waves)."""


def _run_waves(spec: ArmSpec, layout: ArmLayout, backend, manager, task: str,
               waves: list[tuple[list[int], bool]]) -> dict:
    """Each wave's items as one lm-eval call, in order, in this engine; every wave runs
    again after an interruption (a later wave must find the earlier one's cache), with
    vLLM's counters per wave (wave 2's prefix-cache hits are the evidence it resumed).
    With `repeats: k` each wave's repeat scores are written beside its samples and merged
    into the task's repeat-scores file, as one lm-eval call writes them for a plain task."""
    for stale in samples_files(layout.lm_eval_dir, task).get(task, []):
        stale.unlink()
    layout.repeats_file(task).unlink(missing_ok=True)
    exercise, repeat_parts = [], []
    for k, (wave, fresh) in enumerate(waves):
        before = backend.counters()
        chunk_dir = layout.chunk_dir(task, k)
        shutil.rmtree(chunk_dir, ignore_errors=True)  # an interrupted attempt's output
        repeat_parts.append(chunk_dir / WAVE_REPEATS)
        _evaluate(spec, backend.lm, manager, task, chunk_dir, wave,
                  repeats_file=repeat_parts[-1])
        _keep_logprobs(backend.capture, layout, task, append=k > 0)
        layout.mark_chunk_done(chunk_dir, len(wave))
        exercise.append({"wave": k + 1, "items": len(wave), "doc_ids": list(wave),
                         "exercise": _counter_delta(before, backend.counters()),
                         **({"fresh": True} if fresh else {})})
        say(spec, f"{task}: wave {k + 1} of {len(waves)} ({len(wave)} items) done")
    merge_chunk_samples(layout, task, len(waves))
    if all(part.exists() for part in repeat_parts):  # `repeats: k` on a generation task
        merge_repeat_scores(repeat_parts, layout.repeats_file(task))
    return {"n_samples": {task: sum(len(items) for items, _ in waves)}, "waves": exercise}


WARM_CHUNK = 64


def _run_warm_pass(spec: ArmSpec, layout: ArmLayout, lm, manager, task: str) -> dict:
    """Cache stress: the task's items again in the same engine, now with a warm cache, in
    another seeded order and in chunks, so cached prefixes serve different neighbours."""
    warm = layout.warm_layout()
    n_items = _task_size(manager, task, spec.limit)
    order = item_order(n_items, spec.seed + 1, task)
    parts = chunks(order, WARM_CHUNK)
    started = time.time()
    for k, part in enumerate(parts):
        chunk_dir = warm.chunk_dir(task, k)
        if not warm.chunk_done(chunk_dir):
            _evaluate(spec, lm, manager, task, chunk_dir, sorted(int(i) for i in part))
            warm.mark_chunk_done(chunk_dir, len(part))
    merge_chunk_samples(warm, task, len(parts))
    say(spec, f"{task}: warm-cache pass over {n_items} items in {len(parts)} chunks done")
    return {"n_items": n_items, "chunks": len(parts), "wall_seconds": round(time.time() - started, 3)}


def _resolve_for_parent() -> None:
    """With vLLM imported, the effective engine configs the parent's config audit asks for
    (this arm's, maybe a reused arm's), resolved as the resolver process would
    (evals.runner.config_resolver), and handed back."""
    wanted = ask({"kind": RESOLVE})
    if wanted and wanted.get("arms"):
        ask({"kind": RESOLVED, "reports": [resolve_report(arm) for arm in wanted["arms"]]})


def _may_go(spec: ArmSpec) -> bool:
    """The parent's go/stop before any item (the config audit); go when nobody answers."""
    answer = ask({"kind": GO})
    if answer is None or answer.get("go"):
        return True
    say(spec, "stopped before any item ran: the config audit did not pass")
    return False


def _stop_on_sigterm(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds the ExitStack: the server stops


def run(spec: ArmSpec) -> int:
    layout = ArmLayout(Path(spec.output_dir))
    pending = [t for t in spec.tasks if not layout.task_done(t, spec.key_for(t))]
    # every task reused from the store, but no recorded sweep stands in for this arm's:
    # its server starts for the sweep alone (`speed.on_reuse`, evals.dispatch.reuse)
    sweep_only = not pending and layout.sweep_due(spec)
    if not pending and not sweep_only:
        say(spec, "all tasks already finished; nothing to run")
        return 0
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    started = time.time()
    from lm_eval.tasks import TaskManager

    logging.getLogger("lm-eval").setLevel(logging.WARNING)
    manager = task_manager(TaskManager, spec.include_paths, pending)
    unknown = [t for t in pending if t not in manager.all_tasks]
    if unknown:
        # checked before the engine starts: a typo must not cost an engine start
        print(f"{BAD_INPUT_PREFIX}lm-eval knows no task named {', '.join(map(repr, unknown))} "
              f"(searched lm-eval's tasks and {', '.join(spec.include_paths)}).", flush=True)
        return 2
    workarounds = names_in_env(spec.env)
    for name in workarounds:  # checked before vLLM builds engine arguments (and loads
        # its plugins, which apply it)
        problem = workaround_problem(name)
        if problem:
            print(f"{BAD_INPUT_PREFIX}arms.{spec.arm}.engine_workarounds: {name} cannot apply: "
                  f"{problem}.", flush=True)
            return 2
        say(spec, f"engine workaround {name}: {ENGINE_WORKAROUNDS[name].split(';')[0]}")
    import_backend(spec.mode)
    cache_env_info()  # lm-eval's environment report: once, not once per task
    if spec.mode == "offline":
        inspect_in_forks()  # a model class vLLM has not met: inspected by a sibling fork
        _resolve_for_parent()
    timeline = {"started": started, "imported": time.time()}
    ask({"kind": ENGINE_TURN}, timeout=None)  # a worker started early waits here
    with ExitStack() as stack:
        if spec.mode in ("offline", "server"):  # held until this process exits
            stack.enter_context(EngineLock())
        timeline["engine_turn"] = time.time()
        say(spec, f"starting {spec.mode} model for {spec.model}")
        backend = open_backend(spec, layout, stack, ProgressLines)
        say(spec, f"{MODEL_READY} {backend.engine_start_seconds:.0f} s")
        server = {
            "arm": spec.arm,
            "mode": spec.mode,
            "backend": backend.description,
            "effective_engine_config": backend.effective_config,
            # lets a later run audit this arm from its manifest, without a resolver process
            "engine_arg_names": list(engine_arg_names()) if backend.effective_config else None,
            "requested_engine_args": spec.engine,
            "versions": spec.versions,
            # the machine this worker ran on (CPU model and ISA flags, GPUs)
            "platform": probe().to_dict(),
            "model": spec.model,
            "model_hash": spec.model_hash,
            "engine_start_seconds": round(backend.engine_start_seconds, 3),
            # the chat template, system prompt, decoding settings and repeats it ran with
            "sampling": sampling_record(spec.sampling),
        }
        if workarounds:  # the engine ran patched (evals.plan.engine_workarounds)
            server["engine_workarounds"] = workarounds
        # a sweep alone keeps the reused accuracy run's manifest; its server goes beside it
        layout.write_manifest({**layout.read_manifest(), "sweep_server": server}
                              if sweep_only else server)
        if not _may_go(spec):
            return 0
        timeline["go"] = time.time()
        for index, task in enumerate(pending, 1):
            try:
                _run_task(spec, layout, backend, manager, task, f"{index}/{len(pending)}")
            except Exception as exc:
                died = backend.server_died() if backend.server_died else None
                if died:  # the client's error (a refused connection, a 500) is its echo
                    raise ServerFailed(f"{died} during task {task}") from exc
                raise
        if spec.load_sweep and spec.mode == "server":
            try:
                _run_load_sweep(spec, layout, backend, sweep_only=sweep_only,
                                accuracy_seconds=time.time() - timeline["go"])
            except Exception as exc:  # the accuracy results stand; the sweep says what failed
                write_sweep_error(layout.root, spec.arm, f"{type(exc).__name__}: {exc}")
                say(spec, f"load sweep failed: {type(exc).__name__}: {exc}")
        manifest = layout.read_manifest()
        (manifest["sweep_server"] if sweep_only else manifest).update({
            "generation": backend.stats,
            "spec_decode": backend.spec_decode(),
            # its own work: the wait for its engine turn left out
            "wall_seconds_last_run": round(time.time() - timeline["engine_turn"]
                                           + timeline["imported"] - started, 3),
            # when this run's worker started, was imported, got its engine turn, went and
            # finished (epoch seconds): the launcher's one-engine-at-a-time, on record
            "timeline": {**{k: round(v, 3) for k, v in timeline.items()},
                         "finished": round(time.time(), 3)},
            # forked from a fork server with vLLM imported (evals.runner.fork_server)
            "forked": FORKED_ENV in os.environ,
            # vLLM's processes under this worker (its engine core, when that runs in a
            # process of its own): shut down with the arm, none may outlive it
            "engine_processes": engine_processes(),
        })
        if spec.faults:
            manifest["faults"] = {"requested": list(spec.faults), "fired": layout.fault_tally()}
        layout.write_manifest(manifest)
        # an arm sharing its GPU shuts its engine down only while no other engine there starts
        ask({"kind": RELEASE}, timeout=None)
    return 0


def _run_task(spec: ArmSpec, layout: ArmLayout, backend, manager, task: str,
              position: str) -> None:
    task_started = time.time()
    ProgressLines.label = f"{spec.arm}: {task}"
    say(spec, f"task {position} {task} started")
    stats = backend.stats
    before = {"generated_tokens": stats["generated_tokens"], "requests": stats["requests"]}
    counters_before = backend.counters()
    backend.take_timings()  # drop anything from before this task
    if backend.seeds is not None:
        backend.seeds.start_task()  # repeat r counts the task's requests of one prompt
    if backend.capture is not None:
        backend.capture.clear()
    waves = _waves(manager, task, spec.limit)
    if waves is not None:
        record = _run_waves(spec, layout, backend, manager, task, waves)
    elif spec.sequential:
        record = _run_chunked(spec, layout, backend.lm, manager, task, backend.capture)
    else:
        for stale in samples_files(layout.lm_eval_dir, task).get(task, []):
            stale.unlink()  # an earlier attempt's output: the arm's folder holds one run
        results, samples = _evaluate(spec, backend.lm, manager, task, layout.lm_eval_dir,
                                     repeats_file=layout.repeats_file(task))
        _keep_logprobs(backend.capture, layout, task, append=False)
        record = {"n_samples": {k: len(v) for k, v in samples.items()},
                  "task_hashes": results.get("task_hashes", {})}
    seconds = time.time() - task_started
    timings = backend.take_timings()
    counters_after = backend.counters()
    # what vLLM says it did on this task's items: the evidence that an optimization engaged
    record["exercise"] = _counter_delta(counters_before, counters_after)
    if spec.cache_stress:
        record["warm_pass"] = _run_warm_pass(spec, layout, backend.lm, manager, task)
        if backend.capture is not None:
            backend.capture.clear()  # the warm pass's generations are not kept
        record["warm_pass"]["exercise"] = _counter_delta(counters_after, backend.counters())
        backend.take_timings()  # the warm pass is not part of the speed comparison
    if timings:
        SPEED_RECORD.write(layout.speed_file(task), {"task": task, "wall_seconds": seconds,
                                                     "requests": timings})
    layout.mark_task_done(task, {
        "task": task, "key": spec.key_for(task), "wall_seconds": round(seconds, 3),
        "generated_tokens": stats["generated_tokens"] - before["generated_tokens"],
        "requests": stats["requests"] - before["requests"],
        "timed_requests": len(timings), **record,
    })
    say(spec, f"task {position} {task} done in {seconds:.0f} s")


def _run_load_sweep(spec: ArmSpec, layout: ArmLayout, backend, *, accuracy_seconds: float,
                    sweep_only: bool = False) -> None:
    """The config's load sweep on this arm's `vllm serve`, after its accuracy items; the raw
    record into <arm>/load_sweep.json (evals.runner.load_sweep)."""
    from evals.runner.backends import server_counters
    from evals.runner.load_sweep import (Sweep, prompt_vocabulary, synthetic_prompts,
                                         task_prompts, write_sweep)

    settings = spec.load_sweep
    levels = [int(c) for c in settings["levels"]]
    n = int(settings["requests_per_level"])
    source = settings["prompts"]
    if isinstance(source, str):
        files = samples_files(layout.lm_eval_dir, source).get(source, [])
        prompts: list = task_prompts(files[-1]) if files else []
        described = f"task {source}"
    else:
        count = sum(levels) + n * len(levels)  # one prompt per request: no shared prefixes
        prompts = synthetic_prompts(count, int(source["input_tokens"]),
                                    prompt_vocabulary(spec.model), spec.seed)
        described = f"{source['input_tokens']} random token ids (seed {spec.seed})"
    record = {"arm": spec.arm, "levels": levels, "requests_per_level": n,
              "prompts": described, "output_tokens": int(settings["output_tokens"]),
              # ran after this arm's accuracy items, or rerun alone (they were reused)
              "origin": "rerun" if sweep_only else "ran",
              "settings": sweep_settings(settings),
              # the server's state when the sweep began: warm from these accuracy requests
              # (none when rerun alone), and what its start cost
              "warm_state": {"accuracy_requests": backend.stats["requests"],
                             "accuracy_seconds": None if sweep_only
                             else round(accuracy_seconds, 3),
                             "server_start_seconds": round(backend.engine_start_seconds, 3)},
              "results": []}
    if not prompts:
        record["error"] = f"no prompts: the arm's samples of task {source} were not found"
        write_sweep(layout.root, record)
        say(spec, f"load sweep skipped: {record['error']}")
        return
    say(spec, f"load sweep: levels {levels}, {n} requests each, prompts: {described}")
    sweep = Sweep(backend.server_url, backend.served_name, prompts,
                  output_tokens=record["output_tokens"], requests_per_level=n,
                  request_timeout_s=float(settings["request_timeout_s"]),
                  level_timeout_s=float(settings["level_timeout_s"]),
                  server_died=backend.server_died)
    started = time.time()
    record["origin_epoch"] = round(started, 3)
    record["results"] = sweep.run(levels, lambda text: server_counters(text) if text else {},
                                  say=lambda message: say(spec, message))
    record["wall_seconds"] = round(time.time() - started, 3)
    write_sweep(layout.root, record)


def _counter_delta(before: dict, after: dict) -> dict:
    return {name: after[name] - before.get(name, 0.0) for name in sorted(after)}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m evals.runner.worker SPEC.json", file=sys.stderr)
        return 2
    spec = ArmSpec.read(argv[0])
    try:
        return run(spec)
    except ServerFailed as exc:  # the cause is in the server's log, named in the message
        say(spec, str(exc))
        return 3


CHILD_GRACE_SECONDS = 10.0


def engine_processes() -> list[int]:
    """The pids of this worker's child processes (vLLM's engine core and its workers),
    multiprocessing's resource tracker left out."""
    import psutil

    return sorted(c.pid for c in psutil.Process().children(recursive=True)
                  if not resource_tracker(c))


def exit_now(code: int) -> None:
    """Ends the worker once its results are on disk, skipping the interpreter's teardown:
    vLLM's exit handlers and freeing the engine took ~3.4 s per arm on the 2-core CPU
    machine and keep nothing, and Python's multiprocessing exit handler waits without a
    timeout for every child it started (vLLM's engine core, when it runs in a process of
    its own: the worker hung there on a GPU). An engine core in a process of its own was
    shut down when the arm's ExitStack closed (evals.runner.vllm_compat.shutdown_engine),
    one inside this process ends with it here; a child still alive gets
    CHILD_GRACE_SECONDS to end, then SIGTERM, then SIGKILL, so no engine outlives its arm."""
    import psutil

    sys.stdout.flush()
    sys.stderr.flush()
    children = [c for c in psutil.Process().children(recursive=True) if not resource_tracker(c)]
    if children:
        _, alive = psutil.wait_procs(children, timeout=CHILD_GRACE_SECONDS)
        stop_processes(alive)
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
