"""Starts one arm's worker process and follows it; never imports lm-eval or vLLM itself.

One engine at a time: arms run one after another, each in a fresh process, so the
memory of one engine is released before the next starts. The next arm's worker starts
early and imports vLLM and lm-eval while the arm before it runs, then waits for its turn
before it builds its engine (`run_arms_in_turn`). The worker's full output goes to
`<arm>/worker.log`; its `[evals]` progress lines are echoed to the terminal.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from evals.plan.arm_spec import ArmSpec
from evals.errors import RunFailed, UserError
from evals.paths import REPO_ROOT
from evals.plan.engine_workarounds import ENV_VAR as WORKAROUNDS_ENV
from evals.plan.fault_catalog import ENV_VAR as FAULTS_ENV
from evals.plan.fault_catalog import encode_env
from evals.runner import fork_server
from evals.runner.asks import (ASK_DIR_ENV, ASK_PREFIX, ENDED, ENGINE_TURN, GO, RELEASE,
                               Answerer, answer_line)
from evals.runner.layout import ArmLayout
from evals.runner.parent_death import terminate_with_parent
from evals.runner.process_cleanup import exit_description, kill_process_group, sweep_session
from evals.runner.worker_imports import FORK_MODULES

BAD_INPUT_PREFIX = "[evals-bad-input] "  # the worker's marker for a bad-input message


def arm_is_complete(spec: ArmSpec) -> bool:
    """Every task done, and a server arm's load sweep recorded (ran, reused or rerun)."""
    layout = ArmLayout(Path(spec.output_dir))
    return all(layout.task_done(t, spec.key_for(t)) for t in spec.tasks) and \
        not layout.sweep_due(spec)


FAULT_TALLY_ENV = "EVALS_FAULTS_TALLY"  # read by evals.faults.vllm_plugin


def worker_env(spec: ArmSpec) -> dict[str, str]:
    env = dict(os.environ)
    # a canary fault reaches only the arm that asked for it, never one inherited from the shell
    env.pop(FAULTS_ENV, None)
    env.pop(FAULT_TALLY_ENV, None)
    env.pop(WORKAROUNDS_ENV, None)  # likewise an engine workaround: only from the arm's config
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if Path(spec.model).is_dir():
        # a local model needs no hub; hub models (GPU configs) must be allowed to download.
        # An arm's `env:` overrides these, e.g. for hub-hosted task data.
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
            env.setdefault(name, "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(spec.env)
    env.update(spec.secret_env)  # the real values of the secrets `env` records as markers
    if spec.faults:
        env[FAULTS_ENV] = encode_env(list(spec.faults))
        env[FAULT_TALLY_ENV] = str(ArmLayout(Path(spec.output_dir)).fault_tally_dir)
    return env


WORKER = ["-m", "evals.runner.worker"]  # run by this interpreter, with the arm's spec path
# the arms whose workers a fork server forks (a server arm's worker forks its `vllm serve`
# from it too, evals.runner.server); an `hf` arm's worker is a fresh interpreter
FORKABLE_MODES = ("offline", "server", "endpoint")


def start_python(argv: list[str], env: dict[str, str], *, forkable: bool, echo=print,
                 label: str = ""):
    """`python ARGV` in its own session, output (stdout and stderr) in one text pipe. With
    `forkable` and EVALS_FORK_SERVER set, forked from a fork server that has vLLM and
    lm-eval imported (evals.runner.fork_server; a `ForkedProcess`), else a fresh
    interpreter (a `subprocess.Popen`); either dies with its parent."""
    folder = os.environ.get(fork_server.FORK_SERVER_ENV)
    if forkable and folder and argv[:1] == ["-m"]:
        try:
            return fork_server.fork(folder, argv, env, str(REPO_ROOT), modules=FORK_MODULES)
        except fork_server.ForkServerUnavailable as exc:
            echo(f"[evals] {label}: not forked ({exc}); starting a fresh interpreter")
    return subprocess.Popen(
        [sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, env=env, cwd=str(REPO_ROOT), text=True, errors="replace",
        start_new_session=True, preexec_fn=terminate_with_parent)


def _prepare(spec: ArmSpec) -> ArmLayout:
    layout = ArmLayout(Path(spec.output_dir))
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.spec_path.write_text(spec.to_json() + "\n", encoding="utf-8")
    return layout


def _reuse(spec: ArmSpec, echo) -> ArmLayout:
    """A finished arm: nothing runs, its results are used as they are."""
    layout = _prepare(spec)
    echo(f"[evals] {spec.arm}: reusing finished results in {layout.root}")
    return layout


class WorkerRun:
    """One arm's worker process, started at once and followed by a thread of this process.

    Its output goes to `<arm>/worker.log`, its `[evals]` lines to `echo`, its questions
    (evals.runner.asks) to `answer`. Once it has imported its libraries and indexed its
    tasks, the worker asks for its engine turn: a worker started ahead of its turn
    (`turn_now=False`) waits there until `turn` is set, so it imports while the arm before
    it starts, and two engines never run at once. With `hold_go`, its go (before its first
    item) waits until `go` is set: the next arm's imports never overlap a measured task."""

    def __init__(self, spec: ArmSpec, echo=print, answer: Answerer | None = None, *,
                 devices_env: dict[str, str] | None = None, on_start=None,
                 turn_now: bool = True, hold_go: bool = False,
                 engine_release: Callable[[], None] | None = None):
        self.spec, self.echo, self.answer = spec, echo, answer
        self.engine_release = engine_release
        self.layout = _prepare(spec)
        self.turn = threading.Event()  # set: it may build its engine
        self.go = threading.Event()  # set: its go may be answered
        self.waiting = threading.Event()  # set: it asked for its turn, or it ended
        if turn_now:
            self.turn.set()
        if not hold_go:
            self.go.set()
        self.tail: deque[str] = deque(maxlen=25)
        self.bad_input: list[str] = []
        self.error: BaseException | None = None
        self.asks_dir = self.layout.root / "asks"
        shutil.rmtree(self.asks_dir, ignore_errors=True)  # an earlier attempt's unread answers
        self._log = self.layout.log_path.open("a", encoding="utf-8")
        self.proc = start_python(
            [*WORKER, str(self.layout.spec_path)],
            {**worker_env(spec), **(devices_env or {}), ASK_DIR_ENV: str(self.asks_dir)},
            forkable=spec.mode in FORKABLE_MODES, echo=echo, label=spec.arm)
        if on_start is not None:
            on_start(self.proc)
        self._thread = threading.Thread(target=self._follow, daemon=True,
                                        name=f"worker {spec.arm}")
        self._thread.start()

    def _follow(self) -> None:
        try:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self._log.write(line)
                self._log.flush()
                self.tail.append(line.rstrip("\n"))
                if line.startswith("[evals]"):
                    self.echo(line.rstrip("\n"))
                elif line.startswith(ASK_PREFIX):
                    answer_line(line, self.asks_dir, self._reply)
                elif line.startswith(BAD_INPUT_PREFIX):
                    self.bad_input.append(line[len(BAD_INPUT_PREFIX):].strip())
        except BaseException as exc:  # e.g. an answerer's error: raised by finish()
            self.error = exc
            stop_process_group(self.proc)
        finally:
            self.waiting.set()
            if self.answer is not None:  # e.g. a config audit waiting for its resolution
                self.answer({"kind": ENDED})

    def _reply(self, question: dict) -> dict | None:
        if question["kind"] == ENGINE_TURN:
            self.waiting.set()
            self.turn.wait()
            return {"go": True}
        if question["kind"] == RELEASE:
            if self.engine_release is not None:
                self.engine_release()
            return None
        if question["kind"] == GO:
            self.go.wait()
        return self.answer(question) if self.answer is not None else None

    def finish(self) -> ArmLayout:
        """Gives the worker its turn and follows it to its end. Raises RunFailed with the
        log's last lines, or the worker's bad-input message as a UserError."""
        self.turn.set()
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
                if self.proc.poll() is not None:
                    self._drain_after_exit()
                    break
            code = self.proc.wait()
        except BaseException:
            self.stop()
            raise
        # nothing the worker started outlives it: an engine core or a `vllm serve` left
        # behind (its parent killed, say) is stopped here
        left = sweep_session(self.proc.pid)
        if left:
            self.echo(f"[evals] {self.spec.arm}: stopped what its worker left running: "
                      + "; ".join(left))
        self._log.close()
        if self.error is not None:
            raise self.error
        if self.bad_input:
            raise UserError(self.bad_input[0])
        if code != 0:
            last = "\n".join(f"    {line}" for line in self.tail)
            raise RunFailed(f"arm `{self.spec.arm}` failed: its worker (pid {self.proc.pid}) "
                            f"{exit_description(code)}; finished "
                            f"tasks are kept in {self.layout.root} and a rerun resumes from "
                            f"them. Last lines of {self.layout.log_path}:\n{last}")
        return self.layout

    def _drain_after_exit(self) -> None:
        """The worker has exited: its output is read to the end, unless a process it
        started (an engine core that outlived it) holds the pipe open - then that process
        group is stopped, so no engine outlives its arm and the run does not wait on it."""
        self._thread.join(DRAIN_SECONDS)
        if self._thread.is_alive():
            self.echo(f"[evals] {self.spec.arm}: the worker exited, but a process it started "
                      "kept running; stopping it")
            kill_process_group(self.proc.pid)
            self._thread.join(5.0)

    def stop(self) -> None:
        """Stops the worker and everything it started."""
        stop_process_group(self.proc)
        self.turn.set()
        self.go.set()
        self._thread.join(5.0)
        self._log.close()


def run_arm(spec: ArmSpec, echo=print, answer: Answerer | None = None, *,
            devices_env: dict[str, str] | None = None, on_start=None,
            engine_turn: Callable[[], None] | None = None,
            engine_release: Callable[[], None] | None = None) -> ArmLayout:
    """Runs (or resumes, or reuses) one arm. Raises RunFailed with the log's last lines.

    With `answer`, the worker's questions (evals.runner.asks) go to it: `{"kind": "go"}`
    once its engine is ready and before any item (the config audit may run meanwhile), and
    `{"kind": "look", ...}` after each chunk of a sequential run. Without it the worker
    goes at once and never stops early.

    `devices_env`: the devices this arm may use when arms run side by side
    (CUDA_VISIBLE_DEVICES, or a CPU core block); kept out of the spec, so where an arm ran
    does not change its content key. `on_start(proc)` is called with the worker process (a
    launcher running arms in threads stops it on Ctrl-C). `engine_turn()`, when given, returns
    once this arm may build its engine: the worker starts at once and imports meanwhile.
    `engine_release()`, when given, returns once its engine, its items done, may shut down."""
    if arm_is_complete(spec):
        return _reuse(spec, echo)
    worker = WorkerRun(spec, echo, answer, devices_env=devices_env, on_start=on_start,
                       turn_now=engine_turn is None, engine_release=engine_release)
    if engine_turn is not None:
        try:
            engine_turn()
        except BaseException:
            worker.stop()
            raise
    return worker.finish()


def run_arms_in_turn(specs: dict[str, ArmSpec], echo=print,
                     answers: dict[str, Answerer | None] | None = None,
                     after_arm=None) -> dict[str, ArmLayout]:
    """Runs (or reuses) the arms one after another, one engine at a time, as `run_arm`
    does. The next unfinished arm's worker starts with the one before it and imports while
    that one imports and builds its engine; the earlier arm's go waits until the next one
    is imported (see WorkerRun). So each later arm's ~9 s of imports leave the critical
    path, and no import competes with a measured task. `after_arm(name)` is called as each
    arm ends and may raise (the config audit's stop): the started workers are stopped."""
    answers = answers or {}
    to_run = [name for name, spec in specs.items() if not arm_is_complete(spec)]
    workers: dict[str, WorkerRun] = {}
    layouts: dict[str, ArmLayout] = {}

    def start(name: str, turn_now: bool) -> WorkerRun:
        workers[name] = WorkerRun(specs[name], echo, answers.get(name), turn_now=turn_now,
                                  hold_go=name != to_run[-1])
        return workers[name]

    try:
        for name, spec in specs.items():
            if name not in to_run:
                layouts[name] = _reuse(spec, echo)
            else:
                current = workers.get(name) or start(name, turn_now=True)
                current.turn.set()  # the arm before it has ended
                if name != to_run[-1]:  # the next arm imports while this one starts
                    _wait(start(to_run[to_run.index(name) + 1], turn_now=False).waiting)
                    current.go.set()
                layouts[name] = current.finish()
                del workers[name]
            if after_arm is not None:
                after_arm(name)
    except BaseException:
        for worker in workers.values():
            worker.stop()
        raise
    return layouts


def _wait(event: threading.Event) -> None:
    while not event.wait(0.5):  # in slices: Ctrl-C reaches the main thread
        pass


DRAIN_SECONDS = 10.0


def stop_process_group(proc, timeout: float = 20.0) -> list[str]:
    """Stops the worker and every process it started (vLLM's engine core and workers, a
    `vllm serve` and its engine), whatever ended first: the worker's process group gets
    SIGTERM (SIGKILL after `timeout`), then whatever is left in its session is swept, even
    when the worker itself has exited. Returns what the sweep found left behind."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return sweep_session(proc.pid)
