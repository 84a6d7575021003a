"""Starts one arm's worker process and follows it; never imports lm-eval or vLLM itself.

One engine at a time: arms run one after another, each in a fresh process, so the
memory of one engine is released before the next starts. The worker's full output
goes to `<arm>/worker.log`; its `[evals]` progress lines are echoed to the terminal.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path

from evals.plan.arm_spec import ArmSpec
from evals.errors import RunFailed, UserError
from evals.paths import REPO_ROOT
from evals.faults.catalog import ENV_VAR as FAULTS_ENV
from evals.faults.catalog import encode_env
from evals.runner.asks import ASK_DIR_ENV, ASK_PREFIX, Answerer, answer_line
from evals.runner.layout import ArmLayout

BAD_INPUT_PREFIX = "[evals-bad-input] "  # the worker's marker for a bad-input message


def arm_is_complete(spec: ArmSpec) -> bool:
    layout = ArmLayout(Path(spec.output_dir))
    return all(layout.task_done(t, spec.key_for(t)) for t in spec.tasks)


FAULT_TALLY_ENV = "EVALS_FAULTS_TALLY"  # read by evals.faults.vllm_plugin


def worker_env(spec: ArmSpec) -> dict[str, str]:
    env = dict(os.environ)
    # a canary fault reaches only the arm that asked for it, never one inherited from the shell
    env.pop(FAULTS_ENV, None)
    env.pop(FAULT_TALLY_ENV, None)
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
    if spec.faults:
        env[FAULTS_ENV] = encode_env(list(spec.faults))
        env[FAULT_TALLY_ENV] = str(ArmLayout(Path(spec.output_dir)).fault_tally_dir)
    return env


def terminate_with_parent() -> None:
    """In a child (worker, server), before exec: Linux sends it SIGTERM if its parent dies,
    even by SIGKILL, so no engine or server outlives the run that started it (the worker
    turns SIGTERM into a clean stop of its server)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the launcher's own cleanup still applies
        pass


def run_arm(spec: ArmSpec, echo=print, answer: Answerer | None = None, *,
            devices_env: dict[str, str] | None = None, on_start=None) -> ArmLayout:
    """Runs (or resumes, or reuses) one arm. Raises RunFailed with the log's last lines.

    With `answer`, the worker's questions (evals.runner.asks) go to it: `{"kind": "go"}`
    once its engine is ready and before any item (the config audit may run meanwhile), and
    `{"kind": "look", ...}` after each chunk of a sequential run. Without it the worker
    goes at once and never stops early.

    `devices_env`: the devices this arm may use when arms run side by side
    (CUDA_VISIBLE_DEVICES, or a CPU core block); kept out of the spec, so where an arm ran
    does not change its content key. `on_start(proc)` is called with the worker process (a
    launcher running arms in threads stops it on Ctrl-C)."""
    layout = ArmLayout(Path(spec.output_dir))
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.spec_path.write_text(spec.to_json() + "\n", encoding="utf-8")
    if arm_is_complete(spec):
        echo(f"[evals] {spec.arm}: reusing finished results in {layout.root}")
        return layout
    tail: deque[str] = deque(maxlen=25)
    bad_input: list[str] = []
    asks_dir = layout.root / "asks"
    shutil.rmtree(asks_dir, ignore_errors=True)  # an earlier attempt's unread answers
    with layout.log_path.open("a", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evals.runner.worker", str(layout.spec_path)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**worker_env(spec), **(devices_env or {}),
                 **({ASK_DIR_ENV: str(asks_dir)} if answer else {})},
            cwd=str(REPO_ROOT), text=True, errors="replace",
            start_new_session=True, preexec_fn=terminate_with_parent)
        if on_start is not None:
            on_start(proc)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()
                tail.append(line.rstrip("\n"))
                if line.startswith("[evals]"):
                    echo(line.rstrip("\n"))
                elif line.startswith(ASK_PREFIX) and answer is not None:
                    answer_line(line, asks_dir, answer)
                elif line.startswith(BAD_INPUT_PREFIX):
                    bad_input.append(line[len(BAD_INPUT_PREFIX):].strip())
            code = proc.wait()
        except BaseException:
            stop_process_group(proc)
            raise
    if bad_input:
        raise UserError(bad_input[0])
    if code != 0:
        last = "\n".join(f"    {line}" for line in tail)
        raise RunFailed(f"arm `{spec.arm}` failed (worker exit code {code}); finished tasks are "
                        f"kept in {layout.root} and a rerun resumes from them. Last lines of "
                        f"{layout.log_path}:\n{last}")
    return layout


def stop_process_group(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """Stops the worker and every process it spawned (vLLM's engine core and workers)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
