"""The fork server (evals.runner.fork_server) with real processes and a stand-in module
instead of vLLM: a forked child runs as `python -m MODULE ARGS` would, with the request's
environment, working directory and output; the server imports its modules once for many
children; environments that differ in an early variable get their own server; a child
whose launcher dies is stopped; a server that cannot import tells the launcher so.
tests/engine runs every offline arm's worker through it on real engines."""

from __future__ import annotations

import json
import re
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evals.runner import fork_server
from evals.runner.fork_server import ForkServerUnavailable, fork, server_key, stop_servers

REPO = Path(__file__).resolve().parents[2]

PRELOADED = """
import os, time
with open(os.environ["IMPORT_LOG"], "a") as log:
    log.write(f"{os.getpid()}\\n")
WARMED = []


def warm():
    WARMED.append(os.getpid())
"""

STAND_IN = """
import json, os, sys, time
mode = sys.argv[1]
if mode == "sleep":
    print("sleeping", flush=True)
    time.sleep(120)
if mode == "sibling":  # another child of this child's server, with this environment
    from evals.runner.fork_server import fork_sibling
    os.environ["ANSWER"] = "from the child"
    sibling = fork_sibling(["-m", "stand_in", "report", "5"], os.getcwd())
    print(sibling.stdout.read().splitlines()[0], flush=True)
    print(json.dumps({"sibling_exit": sibling.wait(30), "server": sibling.server_pid}))
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "name": __name__,
                  "answer": os.environ.get("ANSWER"), "forked": os.environ.get("EVALS_FORKED"),
                  "pid": os.getpid(), "pgid": os.getpgid(0),
                  "preloaded": "preloaded_mod" in sys.modules,
                  "warmed_in": getattr(sys.modules.get("preloaded_mod"), "WARMED", None)}),
      flush=True)
print("to stderr", file=sys.stderr, flush=True)
sys.exit(int(sys.argv[2]))
"""


@pytest.fixture
def setup(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "preloaded_mod.py").write_text(PRELOADED)
    (code / "stand_in.py").write_text(STAND_IN)
    folder = tmp_path / "servers"
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{code}{os.pathsep}{REPO}",
           "IMPORT_LOG": str(tmp_path / "imports.log")}
    yield folder, env, tmp_path
    stop_servers(folder)


def _run(folder, env, *args, cwd=None, modules=("preloaded_mod",)):
    proc = fork(folder, ["-m", "stand_in", *args], env, cwd or str(REPO), modules=modules)
    out = proc.stdout.read()
    return proc, proc.wait(timeout=30), out


def test_a_forked_child_runs_like_python_dash_m(setup):
    folder, env, tmp = setup
    proc, code, out = _run(folder, {**env, "ANSWER": "42"}, "report", "3", cwd=str(tmp))
    assert code == 3
    data = json.loads(out.splitlines()[0])
    assert data["argv"] == ["report", "3"] and data["name"] == "__main__"
    assert data["cwd"] == str(tmp) and data["answer"] == "42"
    assert data["preloaded"] and data["forked"] == str(proc.server_pid)
    # its own process group (the launcher stops a worker's group), stderr in the same pipe
    assert data["pid"] == proc.pid == data["pgid"]
    assert "to stderr" in out


def test_one_import_serves_many_children_and_late_variables_do_not_split(setup):
    folder, env, tmp = setup
    for n, late in enumerate(["a", "b", "c"]):
        proc, code, _ = _run(folder, {**env, "EVALS_ASK_DIR": late,
                                      "PYTEST_CURRENT_TEST": late}, "x", str(n))
        assert code == n
    imports = (tmp / "imports.log").read_text().split()
    assert len(imports) == 1  # the server imported once; three children used it
    assert len(list(folder.glob("*.pid"))) == 1
    # an early variable (one an import might read) gets a server of its own
    _, code, out = _run(folder, {**env, "OMP_NUM_THREADS": "1"}, "x", "0")
    assert code == 0 and len((tmp / "imports.log").read_text().split()) == 2
    assert len(list(folder.glob("*.pid"))) == 2
    assert server_key(env, ("m",)) == server_key({**env, "EVALS_FAULTS": "x"}, ("m",))
    # pytest's xdist worker, a CI job's description and Ray's variables are late too: two
    # pytest workers, two runs of one workflow, or a run before and after `ray.init` share
    # a server; so do arms that differ only in their CPU KV cache
    for late in ("PYTEST_XDIST_WORKER", "GITHUB_RUN_ID", "GITHUB_OUTPUT", "GITLAB_CI",
                 "RAY_CLIENT_MODE", "PYTHONBREAKPOINT", "VLLM_CPU_KVCACHE_SPACE"):
        assert server_key(env, ("m",)) == server_key({**env, late: "gw1"}, ("m",)), late
    assert server_key(env, ("m",)) != server_key({**env, "HF_HUB_OFFLINE": "1"}, ("m",))
    assert server_key(env, ("m",)) != server_key(env, ("m", "n"))


def test_a_module_function_entry_runs_once_in_the_server_before_its_children(setup):
    """`module:function`: the server calls it after importing; children inherit its work."""
    folder, env, tmp = setup
    pids = set()
    for _ in range(2):
        proc, code, out = _run(folder, env, "x", "0", modules=("preloaded_mod:warm",))
        data = json.loads(out.splitlines()[0])
        assert code == 0 and data["preloaded"]
        # called once, in the server (not in the child), before the child was forked
        assert data["warmed_in"] == [proc.server_pid] != [data["pid"]]
        pids.add(proc.server_pid)
    assert len(pids) == 1 and len((tmp / "imports.log").read_text().split()) == 1
    # a plain `module` entry imports without calling anything
    _, _, out = _run(folder, env, "x", "0")
    assert json.loads(out.splitlines()[0])["warmed_in"] == []


def test_the_log_counts_the_os_threads_the_children_are_forked_beside(setup):
    """An import that starts a thread: the server's log names the OS threads it has when it
    forks (the count /proc gives for the server while it waits)."""
    folder, env, tmp = setup
    (tmp / "code" / "threaded_mod.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n")
    proc, code, _ = _run(folder, env, "x", "0", modules=("threaded_mod",))
    assert code == 0
    (log,) = folder.glob("*.log")
    found = re.search(r"imported 1 modules in [\d.]+ s; (\d+) OS threads", log.read_text())
    assert found, log.read_text()
    assert int(found.group(1)) == len(os.listdir(f"/proc/{proc.server_pid}/task")) >= 2


def test_a_child_whose_launcher_dies_is_stopped(setup):
    """The launcher (here a separate process) is SIGKILLed while its forked child sleeps:
    the server sees the connection close and stops the child."""
    folder, env, tmp = setup
    launcher = f"""
import sys
from evals.runner.fork_server import fork
proc = fork({str(folder)!r}, ["-m", "stand_in", "sleep", "0"], {env!r}, {str(REPO)!r},
            modules=("preloaded_mod",))
print(proc.pid, flush=True)
print(proc.stdout.readline().strip(), flush=True)
proc.wait()
"""
    parent = subprocess.Popen([sys.executable, "-c", launcher], stdout=subprocess.PIPE,
                              text=True, cwd=REPO, env={**env})
    child = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "sleeping"
    os.kill(child, 0)  # alive
    parent.kill()
    parent.wait()
    deadline = time.time() + 10
    while time.time() < deadline and _alive(child):
        time.sleep(0.1)
    assert not _alive(child)


def test_a_killed_child_reports_its_signal_and_the_server_goes_on(setup):
    folder, env, _ = setup
    proc = fork(folder, ["-m", "stand_in", "sleep", "0"], env, str(REPO),
                modules=("preloaded_mod",))
    assert proc.stdout.readline().strip() == "sleeping"
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    _, code, _ = _run(folder, env, "again", "0")
    assert code == 0


def test_a_child_shows_its_own_command_and_takes_signals_as_popen_does(setup):
    """`ps` shows a forked child's command (`python -m MODULE ARGS`), not its server's;
    `terminate` and `kill` reach it as `subprocess.Popen`'s do (evals.runner.server stops
    a forked `vllm serve` with them)."""
    import psutil

    folder, env, _ = setup
    for stop, sig in (("terminate", signal.SIGTERM), ("kill", signal.SIGKILL)):
        proc = fork(folder, ["-m", "stand_in", "sleep", "0"], env, str(REPO),
                    modules=("preloaded_mod",))
        assert proc.stdout.readline().strip() == "sleeping"
        shown = " ".join(psutil.Process(proc.pid).cmdline()).split()
        assert shown == ["python", "-m", "stand_in", "sleep", "0"], shown
        getattr(proc, stop)()
        assert proc.wait(timeout=10) == -sig
        proc.send_signal(signal.SIGTERM)  # an ended child: nothing to signal, no error


def test_stop_servers_ends_them_and_their_children(setup):
    folder, env, _ = setup
    proc = fork(folder, ["-m", "stand_in", "sleep", "0"], env, str(REPO),
                modules=("preloaded_mod",))
    assert proc.stdout.readline().strip() == "sleeping"
    (pid_file,) = folder.glob("*.pid")
    server = int(pid_file.read_text())
    assert stop_servers(folder) == 1
    assert proc.wait(timeout=10) == -signal.SIGTERM
    deadline = time.time() + 10
    while time.time() < deadline and _alive(server):
        time.sleep(0.1)
    assert not _alive(server) and not list(folder.glob("*.pid"))


def test_a_forked_child_forks_a_sibling_from_its_own_server(setup):
    """No EVALS_FORK_SERVER in the request: the child finds its server by itself."""
    folder, env, tmp = setup
    proc, code, out = _run(folder, env, "sibling", "0")
    assert code == 0, out
    sibling, exit_code, child = [json.loads(line) for line in out.splitlines()[:3]]
    assert exit_code == {"sibling_exit": 5, "server": proc.server_pid}
    assert sibling["forked"] == child["forked"] == str(proc.server_pid)
    assert sibling["pid"] not in (proc.pid, child["pid"]) and sibling["preloaded"]
    assert sibling["answer"] == "from the child"  # the child's environment as it was then
    assert len((tmp / "imports.log").read_text().split()) == 1  # no second server
    with pytest.raises(ForkServerUnavailable, match="not forked by a fork server"):
        fork_server.fork_sibling(["-m", "stand_in", "x", "0"], str(REPO))


@pytest.mark.parametrize("value", ["not json", "5", '["only one"]', '[1, 2]', '["a", "b", "c"]'])
def test_a_malformed_fork_key_is_unavailable_not_a_crash(monkeypatch, value):
    """A child whose EVALS_FORK_KEY was overwritten (by a user's shell, a wrapper) falls back
    like one whose server is gone: ForkServerUnavailable, which every caller handles."""
    monkeypatch.setenv(fork_server.FORKED_ENV, "1")
    monkeypatch.setenv(fork_server.FORK_KEY_ENV, value)
    with pytest.raises(ForkServerUnavailable, match="is not \\[folder, key\\]"):
        fork_server.fork_sibling(["-m", "stand_in", "x", "0"], str(REPO))


def test_what_cannot_be_forked_says_why(setup):
    folder, env, _ = setup
    with pytest.raises(ForkServerUnavailable, match="only `-m MODULE`"):
        fork(folder, ["script.py"], env, str(REPO), modules=())
    with pytest.raises(ForkServerUnavailable, match=r"fork server exited .*; see .*\.log"):
        fork(folder, ["-m", "stand_in", "x", "0"], env, str(REPO),
             modules=("no_such_module_anywhere",))
    (log,) = [p for p in folder.glob("*.log") if "no_such_module_anywhere" in p.read_text()]


SLOW_FAILURE = """
import time


class SlowToSay(Exception):
    def __str__(self):
        time.sleep(1.0)  # a traceback that takes a while to write (a slow or busy machine)
        return "slow_failing_module failed"


time.sleep(0.5)  # the launcher connects and sends its request meanwhile
raise SlowToSay()
"""


def test_a_failed_imports_traceback_is_in_the_log_before_the_launcher_is_told(setup):
    """The server writes the traceback and only then closes its socket: a launcher waiting
    for its fork, told "see ....log", finds the reason there at once, however slow the
    writing (this failed on two slowed-down cores when the traceback was written after the
    socket had closed)."""
    folder, env, tmp = setup
    (tmp / "code" / "slow_failing_module.py").write_text(SLOW_FAILURE)
    with pytest.raises(ForkServerUnavailable, match=r"fork server exited .*; see (.*\.log)") as err:
        fork(folder, ["-m", "stand_in", "x", "0"], env, str(REPO), modules=("slow_failing_module",))
    log = Path(re.search(r"see (\S+\.log)", str(err.value)).group(1))
    assert "slow_failing_module failed" in log.read_text()


def test_a_long_folder_works(setup):
    """The socket is abstract (no path): a folder longer than a socket path may be works."""
    folder, env, _ = setup
    long_folder = folder / ("x" * 120)
    _, code, out = _run(long_folder, env, "long", "0")
    assert code == 0 and json.loads(out.splitlines()[0])["argv"] == ["long", "0"]
    stop_servers(long_folder)


def test_more_servers_than_the_limit_retire_the_least_recently_used(setup):
    """One environment more than MAX_SERVERS retires the least recently used server: it
    takes no new request, ends once its child has ended, and a later request for its
    environment starts a new server."""
    folder, env, tmp = setup
    limit = fork_server.MAX_SERVERS
    envs = [{**env, "EARLY": str(n)} for n in range(limit + 1)]
    first = fork(folder, ["-m", "stand_in", "sleep", "0"], envs[0], str(REPO),
                 modules=("preloaded_mod",))
    assert first.stdout.readline().strip() == "sleeping"
    first_server = first.server_pid
    for other in envs[1:]:
        time.sleep(0.05)  # distinct pid-file times
        assert _run(folder, other, "x", "0")[1] == 0  # the last one retires envs[0]'s
    assert len(list(folder.glob("*.pid"))) == limit
    time.sleep(1.0)
    assert _alive(first_server) and first.poll() is None  # its child still runs
    os.killpg(first.pid, signal.SIGKILL)
    assert first.wait(timeout=10) == -signal.SIGKILL
    deadline = time.time() + 10
    while time.time() < deadline and _alive(first_server):
        time.sleep(0.1)
    assert not _alive(first_server)
    proc, code, _ = _run(folder, envs[0], "x", "0")
    assert code == 0 and proc.server_pid != first_server
    assert len((tmp / "imports.log").read_text().split()) == limit + 2


def test_another_users_process_gets_nothing_forked(setup):
    folder, env, tmp = setup
    if os.getuid() != 0:
        pytest.skip("needs root to connect as another user")
    assert _run(folder, env, "x", "0")[1] == 0  # the server is up
    (key,) = [p.stem for p in folder.glob("*.pid")]
    address = fork_server._address(folder, key)
    answer_r, answer_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a client as user `nobody`: connects and asks for a fork
        try:
            os.setuid(65534)
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            conn.connect(address)
            r, w = os.pipe()
            request = {"argv": ["-m", "stand_in", "x", "0"], "env": {}, "cwd": "/"}
            try:
                socket.send_fds(conn, [json.dumps(request).encode()], [w])
                os.write(answer_w, b"reply:" + conn.recv(1000))
            except OSError:  # the server closed the connection first
                os.write(answer_w, b"refused")
        finally:
            os._exit(0)
    os.close(answer_w)
    os.waitpid(pid, 0)
    with os.fdopen(answer_r, "rb") as answer:
        # the connection was closed: no pid, nothing forked
        assert answer.read() in (b"reply:", b"refused")
    assert len((tmp / "imports.log").read_text().split()) == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False

