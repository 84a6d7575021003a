"""`vllm serve` for a server-mode arm: a free loopback port, health wait, metrics, sure stop.

The server leads a process group of its own in the worker's session: `stop()` signals that
group, so its engine core is stopped even when the API server died first (its engine core
then belongs to init, but keeps the group), and the launcher's sweep of the worker's
session (evals.runner.process_cleanup) stops what is left if the worker itself died.
With EVALS_FORK_SERVER set (evals.runner.fork_server), `vllm serve` is forked from a fork
server that has vLLM imported instead (its API server's ~9 CPU-seconds of imports are not
paid again; its engine core is still a process of its own), in a session of its own: the
worker's connection to the fork server is its lifetime, so a worker that dies for any
reason takes it along. `VllmServer` is a context manager; leaving it - normally, by an
exception, by SIGINT or SIGTERM turned into an exception by the worker - terminates the
server and then kills whatever of its process tree is left.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import requests

from evals.runner import fork_server
from evals.runner.engine_args import engine_flags
from evals.runner.parent_death import terminate_with_parent
from evals.runner.process_cleanup import exit_description, kill_process_group
from evals.runner.worker_imports import FORK_MODULES

# the server's pid, which leads its process group (its engine core's too): in its log, so
# whatever of it outlives a run can be found afterwards
PID_LINE = "[evals] vllm serve pid {pid} (its own process group)\n"
LOOPBACK = "127.0.0.1"
SERVED_NAME = "evals-arm"
HEALTH_TIMEOUT_S = 900.0


class ServerFailed(RuntimeError):
    """`vllm serve` did not come up; the message names its log and its last error line."""


_ERROR_LINE = re.compile(r"\b[Ee]rror\b[:,]|Error:")


def _last_error(log_path: Path) -> str:
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    errors = [line.strip() for line in lines if _ERROR_LINE.search(line)]
    return errors[-1][:500] if errors else (lines[-1].strip()[:500] if lines else "(empty log)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def serve_arguments(model: str, engine: dict, port: int, seed: int) -> list[str]:
    """`vllm serve` command line from engine keyword arguments (spelled as EngineArgs)."""
    return [model, "--host", LOOPBACK, "--port", str(port), "--served-model-name", SERVED_NAME,
            "--seed", str(seed), "--disable-uvicorn-access-log"] + engine_flags(engine)


def vllm_command(python: str = sys.executable) -> list[str]:
    """The `vllm` CLI of this interpreter's vLLM: its script beside the interpreter, else
    the CLI module run by this interpreter (a `pip install --target` has its scripts in a
    folder off PATH; a `vllm` on PATH may belong to another environment)."""
    exe = Path(python).with_name("vllm")
    return [str(exe)] if exe.exists() else [python, "-m", "vllm.entrypoints.cli.main"]


class VllmServer:
    """A `vllm serve` process on a free loopback port, logging to `log_path`."""

    def __init__(self, model: str, engine: dict, log_path: Path, *, seed: int,
                 env: dict[str, str] | None = None):
        self.port = free_port()
        self.base_url = f"http://{LOOPBACK}:{self.port}"
        self.command = vllm_command() + ["serve"] + serve_arguments(model, engine, self.port,
                                                                    seed)
        self.log_path = log_path
        self.env = env
        self.proc = None  # a subprocess.Popen, or a fork_server.ForkedProcess
        self._copier: threading.Thread | None = None
        self.ready_seconds = 0.0

    def __enter__(self) -> VllmServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("a", encoding="utf-8")
        started = time.time()
        self.proc = self._forked(log)
        if self.proc is None:
            log.write("$ " + " ".join(self.command) + "\n")
            log.flush()
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env,
                                         process_group=0, preexec_fn=terminate_with_parent)
            log.write(PID_LINE.format(pid=self.proc.pid))
            log.close()
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.time() - started
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _forked(self, log):
        """`vllm serve` forked from the fork server (EVALS_FORK_SERVER), its output copied
        into the log by a thread; None where there is no fork server or it cannot fork."""
        folder = (self.env if self.env is not None else os.environ).get(
            fork_server.FORK_SERVER_ENV)
        if not folder:
            return None
        argv = ["-m", "vllm.entrypoints.cli.main", *self.command[self.command.index("serve"):]]
        try:
            proc = fork_server.fork(folder, argv, dict(self.env or os.environ), os.getcwd(),
                                    modules=FORK_MODULES)
        except fork_server.ForkServerUnavailable as exc:
            log.write(f"(not forked: {exc})\n")
            return None
        log.write(f"$ python {' '.join(argv)}   (forked from the fork server, pid "
                  f"{proc.server_pid})\n")
        log.write(PID_LINE.format(pid=proc.pid))
        log.flush()

        def copy() -> None:
            with log:
                for line in proc.stdout:
                    log.write(line)
                    log.flush()

        self._copier = threading.Thread(target=copy, daemon=True, name="vllm serve log")
        self._copier.start()
        return proc

    def _wait_healthy(self) -> None:
        assert self.proc is not None
        deadline = time.time() + HEALTH_TIMEOUT_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                if self._copier is not None:  # its last lines into the log first
                    self._copier.join(timeout=5)
                raise ServerFailed(f"`vllm serve` exited with code {self.proc.returncode} before "
                                   f"it was healthy. Its last error: {_last_error(self.log_path)} "
                                   f"(full log: {self.log_path})")
            try:
                if requests.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise ServerFailed(f"`vllm serve` was not healthy after {HEALTH_TIMEOUT_S:.0f} s; "
                           f"see {self.log_path}")

    def metrics_text(self) -> str:
        return requests.get(f"{self.base_url}/metrics", timeout=10).text

    def died(self) -> str | None:
        """None while the server runs; once it has ended, what ended it, with its pid."""
        if self.proc is None or self.proc.poll() is None:
            return None
        return f"`vllm serve` (pid {self.proc.pid}) " \
               f"{exit_description(self.proc.returncode)}; its log: {self.log_path}"

    def stop(self, timeout: float = 30.0) -> None:
        """Stops the server and its engine, also when the server itself has already died:
        its process group (engine core, helpers) is signalled whatever became of it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        tree = []
        if proc.poll() is None:
            try:
                tree = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                pass
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        kill_process_group(proc.pid)  # it leads its group, forked or not
        _, alive = psutil.wait_procs(tree, timeout=10)
        for child in alive:  # a child that left the group
            try:
                child.kill()
            except psutil.Error:
                pass
        if self._copier is not None:  # the log's last lines
            self._copier.join(timeout=5)
