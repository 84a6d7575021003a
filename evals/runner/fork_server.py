"""Workers forked from a process that has already imported vLLM and lm-eval.

Importing vLLM and lm-eval costs about 10 CPU-seconds per process on a 2-core machine, and
every arm's worker paid it again: two per `ab` run, one per arm of a study or a canary,
dozens in a test session. With `EVALS_FORK_SERVER=DIR`, the launcher asks a fork server
in DIR for each offline arm's worker instead of starting a fresh interpreter. The server
imports once; for each request it forks a child that runs `python -m MODULE ARGS` as a
fresh interpreter would: the arm's own environment, working directory and output pipe,
its own session (process group), and it dies with the server.

A server serves only requests whose environment equals the one it imported under, except
for the variables read only after the worker starts (`is_late`: the suite's own `EVALS_*`
variables - the ask folder, the canary's faults, the engine lock, the store -, pytest's
`PYTEST_*`, the CI systems' `GITHUB_*` and `GITLAB_*` job variables, and Ray's `RAY_*`);
another
environment starts another server. A folder keeps
at most MAX_SERVERS (each holds ~0.8 GB of imported libraries): starting one more retires
the least recently used, which takes no new request and ends when its children have ended.
A forked child may ask its own server for a sibling with its environment as it is then
(`fork_sibling`: vLLM's model-class inspections, evals.runner.model_inspection).
The request's connection is the child's lifetime: if the launcher goes away, the server
stops the child; when the child ends, the server sends its exit code. A server ends after
IDLE_SECONDS with neither a child nor a request, on SIGTERM (`stop_servers`), or when DIR
is removed. Children are forked after `gc.freeze()`, by the server's only Python thread;
vLLM itself forks its workers from the same imported state. The imports leave native threads
beside it (on a 2-core AMD EPYC, 5 OS threads in all: numpy's import starts one, lm-eval's a
jemalloc background thread, vLLM's two more), which a forked child does not have; the log's
first line counts them, for a CPU kind where a forked child fails (issue 49: a child of a
server that had also imported vLLM's engine-start modules died at its first forward pass on
an Intel Xeon with AMX).

The socket is in Linux's abstract namespace (no path length limit, nothing left behind),
named after DIR and the key; the server serves only processes of its own user (checked
with SO_PEERCRED). DIR holds each server's pid file (touched at each request: the
least recently used), log and start lock.

MODULES_JSON lists what the server imports; an entry `module:function` also calls that
function, without arguments, once the module is imported (work its children then inherit).

`python -m evals.runner.fork_server DIR KEY MODULES_JSON` runs a server (the launcher
starts it; nobody runs it by hand).
"""

from __future__ import annotations

import atexit
import fcntl
import gc
import hashlib
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path

FORK_SERVER_ENV = "EVALS_FORK_SERVER"  # a folder: fork offline workers from a server there
FORKED_ENV = "EVALS_FORKED"  # set in a forked child: the server's pid
FORK_KEY_ENV = "EVALS_FORK_KEY"  # set in a forked child: its server's [folder, key] (JSON)
IDLE_SECONDS = 300.0
MAX_SERVERS = 4  # per folder
START_TIMEOUT = 60.0  # for the server's socket to appear (its imports come after)
IMPORT_TIMEOUT = 900.0  # for its first fork, after its imports
STOP_GRACE = 20.0  # SIGTERM, then SIGKILL, for a child whose launcher went away
_MAX_MESSAGE = 1 << 20


class ForkServerUnavailable(RuntimeError):
    """The server could not be reached or started; the launcher starts a fresh interpreter."""


# Variables nothing reads while a server imports vLLM, torch and lm-eval: the suite's own
# (read when it uses them), pytest's (the current test, the xdist worker), the CI
# systems' description of the job (its run id, the step's summary and output files), which
# only the suite's CI outputs read (evals.report.ci_outputs), and Ray's, which only Ray
# reads, once imported (no module a server imports imports Ray; `--executor ray` sets
# some in its own process: `import ray` sets RAY_CLIENT_MODE)
LATE_PREFIXES = ("EVALS_", "PYTEST_", "GITHUB_", "GITLAB_", "RAY_")
# and single ones: PYTHONBREAKPOINT, read by `breakpoint()` when it is called (Ray's driver
# sets it in its process), and VLLM_CPU_KVCACHE_SPACE, read when vLLM builds an engine's
# config (vllm.platforms.cpu), so arms that differ only in their KV cache share a server
LATE_NAMES = frozenset({"PYTHONBREAKPOINT", "VLLM_CPU_KVCACHE_SPACE"})


def is_late(name: str) -> bool:
    """A variable nothing reads while the server imports (LATE_PREFIXES, LATE_NAMES)."""
    return name.startswith(LATE_PREFIXES) or name in LATE_NAMES


def server_key(env: dict[str, str], modules: tuple[str, ...]) -> str:
    """Which server may fork a child with `env`: equal for environments that differ only in
    late variables, and for the same imported modules and interpreter."""
    early = {k: v for k, v in env.items() if not is_late(k)}
    blob = json.dumps([sys.executable, list(modules), sorted(early.items())])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---- the launcher's side ----

class ForkedProcess:
    """A forked child, as much of `subprocess.Popen` as the launcher uses: `pid`, `stdout`
    (text), `returncode`, `poll()`, `wait(timeout)`, `send_signal`, `terminate` and `kill`.
    Its pid leads its own process group."""

    def __init__(self, conn: socket.socket, pid: int, stdout, server_pid: int):
        self._conn, self.pid, self.stdout, self.server_pid = conn, pid, stdout, server_pid
        self.returncode: int | None = None
        self.args = ["fork", str(server_pid)]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # ended; its exit code is on its way
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read_exit()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_exit()
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        """All of the child's output, once it has ended (as Popen's, stdout only)."""
        deadline = None if timeout is None else time.time() + timeout
        fd, chunks = self.stdout.fileno(), []
        while True:
            left = None if deadline is None else max(0.0, deadline - time.time())
            if not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            data = os.read(fd, 1 << 16)
            if not data:
                break
            chunks.append(data)
        self.stdout.close()
        self.wait(None if deadline is None else max(0.1, deadline - time.time()))
        return b"".join(chunks).decode("utf-8", "replace"), None

    def _read_exit(self) -> None:
        message = self._conn.recv(_MAX_MESSAGE)
        # the server gone without an exit code: its children got SIGTERM with it
        self.returncode = json.loads(message)["exit"] if message else -signal.SIGTERM
        self._conn.close()


def fork(folder: str | Path, argv: list[str], env: dict[str, str], cwd: str, *,
         modules: tuple[str, ...]) -> ForkedProcess:
    """Starts `python ARGV` (`["-m", MODULE, ...]`) as a child of the fork server in `folder`
    that has imported `modules` under `env` (started here if there is none yet). Its stdout
    and stderr go to one pipe, read from the returned process's `stdout`. Raises
    ForkServerUnavailable when no server can fork it."""
    _check_argv(argv)
    folder = Path(folder)
    early = {k: v for k, v in env.items() if not is_late(k)}  # what the server runs with
    key = server_key(early, modules)
    return _request(_connect(folder, key, early, cwd, modules), folder, key, argv, env, cwd)


def fork_sibling(argv: list[str], cwd: str) -> ForkedProcess:
    """In a forked child: `python ARGV` (`["-m", MODULE, ...]`) forked by the same server,
    with this process's environment as it is now. Raises ForkServerUnavailable in a process
    that is not a forked child, or when its server is gone."""
    _check_argv(argv)
    if FORKED_ENV not in os.environ or FORK_KEY_ENV not in os.environ:
        raise ForkServerUnavailable("this process was not forked by a fork server")
    try:
        folder, key = json.loads(os.environ[FORK_KEY_ENV])
        if not (isinstance(folder, str) and isinstance(key, str)):
            raise TypeError("not two strings")
    except (ValueError, TypeError) as exc:  # not JSON, or not a list of two strings
        raise ForkServerUnavailable(f"{FORK_KEY_ENV} is not [folder, key]: {exc}") from None
    conn = _try_connect(_address(Path(folder), key))
    if conn is None:
        raise ForkServerUnavailable(f"the fork server {key} in {folder} is gone")
    return _request(conn, Path(folder), key, argv, dict(os.environ), cwd)


def _check_argv(argv: list[str]) -> None:
    if argv[:1] != ["-m"] or len(argv) < 2:
        raise ForkServerUnavailable(f"only `-m MODULE` commands are forked, not {argv[:2]}")


def _request(conn: socket.socket, folder: Path, key: str, argv: list[str],
             env: dict[str, str], cwd: str) -> ForkedProcess:
    read_end, write_end = os.pipe()
    try:
        request = {"argv": argv, "env": env, "cwd": cwd}
        socket.send_fds(conn, [json.dumps(request).encode()], [write_end])
    except OSError as exc:
        os.close(read_end)
        conn.close()
        raise ForkServerUnavailable(f"the fork server in {folder} did not take the request: "
                                    f"{exc}") from exc
    finally:
        os.close(write_end)
    if select.select([conn], [], [], IMPORT_TIMEOUT)[0]:  # the first request: after imports
        try:
            message = conn.recv(_MAX_MESSAGE)
        except ConnectionResetError:  # it exited before accepting us (a failed import)
            message = b""
        reply = json.loads(message) if message else {
            "error": f"the fork server exited before forking; see {folder / key}.log"}
    else:
        reply = {"error": f"the fork server did not fork in {IMPORT_TIMEOUT:.0f} s"}
    if "pid" not in reply:
        os.close(read_end)
        conn.close()
        raise ForkServerUnavailable(reply["error"])
    stdout = open(read_end, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by EOF
    return ForkedProcess(conn, reply["pid"], stdout, reply["server"])


def _address(folder: Path, key: str) -> str:
    """The server's abstract socket name (a leading NUL: no file, no path length limit)."""
    digest = hashlib.sha256(f"{folder.resolve()}\0{key}".encode()).hexdigest()[:32]
    return f"\0evals-fork-{digest}"


def _connect(folder: Path, key: str, env: dict[str, str], cwd: str,
             modules: tuple[str, ...]) -> socket.socket:
    address = _address(folder, key)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{key}.lock", "a") as lock:  # one starter per key
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _try_connect(address)
        if conn is not None:
            return conn
        _retire_least_recent(folder, keep=MAX_SERVERS - 1)
        with open(folder / f"{key}.log", "ab") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "evals.runner.fork_server", str(folder), key,
                 json.dumps(list(modules))],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=cwd, start_new_session=True)  # outlives this launcher
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            conn = _try_connect(address)
            if conn is not None:
                return conn
            if server.poll() is not None:
                raise ForkServerUnavailable(f"the fork server exited with code "
                                            f"{server.returncode}; see {folder / key}.log")
            time.sleep(0.05)
        server.kill()
        raise ForkServerUnavailable(f"the fork server did not listen in {START_TIMEOUT:.0f} s")


def _try_connect(address: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(address)
    except OSError:
        conn.close()
        return None
    return conn


def _retire_least_recent(folder: Path, keep: int) -> None:
    """SIGUSR1 to all but the `keep` most recently used servers: each stops taking requests
    and ends when its children have ended."""
    def last_used(pid_file: Path) -> float:
        try:
            return pid_file.stat().st_mtime
        except OSError:
            return 0.0

    for pid_file in sorted(folder.glob("*.pid"), key=last_used, reverse=True)[keep:]:
        _signal_server(pid_file, signal.SIGUSR1, forget=True)


def stop_servers(folder: str | Path) -> int:
    """SIGTERM to every server in `folder` (each stops its children); how many there were."""
    return sum(_signal_server(p, signal.SIGTERM) for p in Path(folder).glob("*.pid"))


def _signal_server(pid_file: Path, sig: int, forget: bool = False) -> bool:
    """Sends `sig` to the server of `pid_file` (with `forget`, its pid file goes first: a
    retiring server is no longer counted or stopped); False when it is gone already."""
    try:
        pid = int(pid_file.read_text())
        if forget:
            pid_file.unlink()
        os.kill(pid, sig)
    except (OSError, ValueError):
        return False
    return True


# ---- the server ----

class _Stop(Exception):
    pass


def _on_sigterm(signum, frame):
    raise _Stop()


_retiring: list[bool] = []


def _on_sigusr1(signum, frame):
    _retiring.append(True)


def serve(folder: Path, key: str, modules: list[str]) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGUSR1, _on_sigusr1)
    listener: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(_address(folder, key))
    listener.listen(16)
    pid_file = folder / f"{key}.pid"
    pid_file.write_text(str(os.getpid()))
    children: dict[int, socket.socket | None] = {}  # pid -> its launcher's connection
    waiting: list[socket.socket] = []  # connections whose request has not come yet
    doomed: dict[int, float] = {}  # pid -> when to SIGKILL (its launcher went away)
    try:
        started = time.time()
        for entry in modules:  # `module`, or `module:function` to call once imported
            module, _, function = entry.partition(":")
            imported = importlib.import_module(module)
            if function:
                getattr(imported, function)()
        gc.collect()
        gc.freeze()  # the children's copy-on-write pages stay shared
        threads = len(os.listdir("/proc/self/task"))  # the children are forked beside them
        print(f"imported {len(modules)} modules in {time.time() - started:.1f} s; {threads} "
              f"OS threads", flush=True)
        idle_since = time.time()
        while folder.is_dir():
            if _retiring and listener is not None:  # no new requests; end with the children
                listener.close()
                listener = None
            watched = [*([listener] if listener is not None else []), *waiting,
                       *(c for c in children.values() if c is not None)]
            for conn in select.select(watched, [], [], 0.5)[0]:
                if conn is listener:
                    try:
                        new, _ = listener.accept()
                    except OSError:  # the client gave up
                        continue
                    if _peer_uid(new) == os.getuid():
                        waiting.append(new)
                    else:  # another user's process: never fork for it
                        new.close()
                elif conn in waiting:
                    waiting.remove(conn)
                    pid = _serve_request(conn, listener, waiting, children, [str(folder), key])
                    if pid is not None:
                        children[pid] = conn
                        _touch(pid_file)
                else:  # its launcher went away while the child runs: stop the child
                    pid = next(p for p, c in children.items() if c is conn)
                    conn.close()
                    children[pid] = None
                    _signal_group(pid, signal.SIGTERM)
                    doomed[pid] = time.time() + STOP_GRACE
            _reap(children)
            for pid, when in list(doomed.items()):
                if time.time() > when:  # the group, even if its leader has been reaped
                    _signal_group(pid, signal.SIGKILL)
                    del doomed[pid]
            if children or waiting:
                idle_since = time.time()
            elif _retiring or time.time() - idle_since > IDLE_SECONDS:
                break
    except _Stop:
        pass
    except Exception:  # noqa: BLE001 - a failed import: into the log before the listener
        traceback.print_exc()  # closes, so a waiting launcher told "see the log" finds it
        sys.stderr.flush()
        return 1
    finally:
        for pid in children:
            _signal_group(pid, signal.SIGTERM)
        if listener is not None:
            listener.close()
        if not _retiring:  # a retired server's pid file is already gone
            pid_file.unlink(missing_ok=True)
    return 0


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]  # pid, uid, gid


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:  # retired meanwhile
        pass


def _serve_request(conn: socket.socket, listener: socket.socket | None, waiting: list,
                   children: dict, server: list[str]) -> int | None:
    try:
        message, fds, _, _ = socket.recv_fds(conn, _MAX_MESSAGE, 1)
    except OSError:
        message, fds = b"", []
    if not message or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    request = json.loads(message)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            if listener is not None:
                listener.close()
            for other in [conn, *waiting, *children.values()]:
                if other is not None:
                    other.close()
            code = _run_child(request, fds[0], server)
        except BaseException:  # noqa: BLE001 - reported in the child's own output
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(fds[0])  # only the child writes to the pipe: its reader sees EOF at its end
    try:
        conn.send(json.dumps({"pid": pid, "server": os.getpid()}).encode())
    except OSError:  # its launcher is gone already: the loop sees it and stops the child
        pass
    return pid


def _run_child(request: dict, out_fd: int, server: list[str]) -> int:
    """In the forked child: becomes `python ARGV` with the request's environment, working
    directory and output, and its server's pid and [folder, key] (FORKED_ENV, FORK_KEY_ENV).
    Returns its exit code."""
    import runpy

    from evals.runner.parent_death import terminate_with_parent

    # first: setproctitle finds the memory it writes the title to through the environment
    # the server started with, which is replaced below
    _set_title(["python", *request["argv"]])
    os.setsid()
    terminate_with_parent()  # dies with the server
    # the signal handling of a fresh interpreter, not the server's
    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(devnull)
    os.close(out_fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ[FORKED_ENV] = str(os.getppid())
    os.environ[FORK_KEY_ENV] = json.dumps(server)
    module, args = request["argv"][1], request["argv"][2:]
    sys.argv = ["-m", *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - as the interpreter: traceback, exit code 1
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # as the interpreter would at exit
    return code


def _set_title(argv: list[str]) -> None:
    """The child's command line, as `ps` and psutil show it: the command it runs, not the
    server's (setproctitle, which vLLM installs; without it the server's stays)."""
    try:
        import setproctitle
    except ImportError:
        return
    setproctitle.setproctitle(" ".join(argv))


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def _reap(children: dict) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            try:
                conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
            except OSError:
                pass
            conn.close()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m evals.runner.fork_server DIR KEY MODULES_JSON", file=sys.stderr)
        return 2
    return serve(Path(argv[0]), argv[1], json.loads(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
