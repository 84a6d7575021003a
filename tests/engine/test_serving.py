"""Server-mode arms on real `vllm serve` processes: an A/B with speed and cache stress, and
no server left behind after success, after a failing arm, and after Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from engine_helpers import (CPU_ENV, ENGINE, MODEL, REPO, read_summary, run_cli, save_artifact,
                            write_config)

from evals.runner.fork_server import FORK_SERVER_ENV

TASKS = [{"name": "tiny_reviews_shared_prefix", "metric": "exact_match"},
         {"name": "tiny_addition", "metric": "exact_match"}]
MTP_PREFIX = {**ENGINE, "enable_prefix_caching": True,
              "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}


def server_groups(run_root) -> set[int]:
    """The pids of the run's `vllm serve` processes, from their logs."""
    return {int(m.group(1)) for log in Path(run_root).rglob("server.log")
            for m in re.finditer(r"\[evals\] vllm serve pid (\d+)",
                                 log.read_text(encoding="utf-8", errors="replace"))}


def serving_processes(run_root) -> list[str]:
    """What is left alive of the `vllm serve` processes of the run(s) under `run_root`: each
    server's pid is in its log (evals.runner.server.PID_LINE) and leads a process group that
    its engine core belongs to, also once the server itself is gone. So another engine
    stream's servers, running at the same time, are not taken for this run's."""
    groups = server_groups(run_root)
    found = []
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE or os.getpgid(proc.pid) not in groups:
                continue
            cmdline = " ".join(proc.info["cmdline"] or []) or proc.info["name"] or ""
        except (psutil.Error, OSError):
            continue
        found.append(f"{proc.info['pid']}: {cmdline[:120]}")
    return found


def _settle(run_root) -> list[str]:
    for _ in range(20):  # processes being reaped may linger a moment
        left = serving_processes(run_root)
        if not left:
            return []
        time.sleep(0.5)
    return serving_processes(run_root)


def test_server_arms_speed_and_cache_stress_leave_no_server_behind(tmp_path):
    config = write_config(
        tmp_path, "serving", {"mode": "server", "concurrency": 8,
                              "engine": {**ENGINE, "enable_prefix_caching": False}},
        {"mode": "server", "concurrency": 8, "cache_stress": True, "engine": MTP_PREFIX},
        tasks=TASKS, limit=150)
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"))
    assert result.returncode in (0, 1, 3), result.stdout + result.stderr
    assert server_groups(tmp_path)  # its servers started (and are named in their logs)
    assert _settle(tmp_path) == []
    summary = read_summary(tmp_path / "reports")
    run_dir = next((tmp_path / "reports").glob("*/summary.json")).parent
    for arm in ("baseline", "candidate"):
        assert "`vllm serve` on http://127.0.0.1:" in summary["arms"][arm]["backend"]
        log = (run_dir / "arms" / arm / "server.log").read_text(encoding="utf-8")
        assert "--host 127.0.0.1" in log
        # the engine tests set EVALS_FORK_SERVER: `vllm serve` was forked, not imported anew
        assert "(forked from the fork server" in log.splitlines()[0], log[:500]
        assert "Application startup complete" in log  # its output reached the log
    speed = summary["speed"]
    for arm in ("baseline", "candidate"):
        assert speed[arm]["requests"] == 2 * 150  # every generation request was timed
        assert 0 < speed[arm]["ttft_p50"] <= speed[arm]["ttft_p95"]
        assert 0 < speed[arm]["tpot_p50"] <= speed[arm]["tpot_p95"]
        assert speed[arm]["output_tokens_per_s"] > 0
    assert speed["baseline"]["acceptance_rate"] is None
    assert 0 < speed["candidate"]["acceptance_rate"] <= 1
    assert speed["ci_low"] <= speed["tpot_speedup"] <= speed["ci_high"]
    checks = {c["task"]: c for c in summary["cache_stress"]}
    assert set(checks) == {"tiny_reviews_shared_prefix", "tiny_addition"}
    assert all(c["arm"] == "candidate" and c["n"] == 150 for c in checks.values())
    warm_tasks = [t for t in summary["tasks"] if t["task"].endswith(" (warm cache)")]
    assert len(warm_tasks) == 2 and all(t["n"] == 150 for t in warm_tasks)
    assert "<strong>Speed:</strong> candidate " in (run_dir / "report.html").read_text(encoding="utf-8")
    save_artifact("serving_ab.json", {"speed": speed, "cache_stress": summary["cache_stress"],
                                      "verdict": summary["verdict"]})


def test_a_failing_server_arm_exits_4_and_leaves_no_server_behind(tmp_path):
    # 4096 tokens exceed the model's 1,024 positions: `vllm serve` refuses to start
    config = write_config(
        tmp_path, "failing", {"mode": "server", "engine": {**ENGINE, "max_model_len": 4096}},
        {"mode": "server", "engine": MTP_PREFIX}, tasks=TASKS, limit=20)
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"))
    assert result.returncode == 4, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "server.log" in result.stderr or "server.log" in result.stdout
    assert server_groups(tmp_path)  # its servers started (and are named in their logs)
    assert _settle(tmp_path) == []


def _servers_of(pid: int, reports: Path) -> dict[int, str]:
    """This run's `vllm serve` processes and their engine processes: the API servers
    started by process `pid` (its descendants) or, forked from the fork server
    (evals.runner.server), on a port one of the run's server logs names; so that another
    test's engine on this machine (the other pytest worker) is not taken for this run's."""
    ports = {m.group(1) for log in reports.glob("*/arms/*/server.log")
             for m in [re.search(r"--port (\d+)", log.read_text(encoding="utf-8"))] if m}
    try:
        family = set(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        family = set()
    found = {}
    for proc in psutil.process_iter():
        try:
            cmdline, name = " ".join(proc.cmdline()), proc.name()
            if " serve " in f" {cmdline} " and "vllm" in cmdline and (
                    proc in family or any(f"--port {p} " in f"{cmdline} " for p in ports)):
                found[proc.pid] = cmdline[:120]
                found.update({c.pid: f"{c.name()} of {proc.pid}"
                              for c in proc.children(recursive=True)
                              if "VLLM::" in " ".join(c.cmdline()) + c.name()})
            elif proc in family and "VLLM::" in cmdline + name:
                found[proc.pid] = cmdline[:120]
        except psutil.Error:
            continue
    return found


def _alive(pids) -> list[str]:
    for _ in range(20):  # processes being reaped may linger a moment
        left = [f"{pid}: {psutil.Process(pid).cmdline()[:4]}" for pid in pids
                if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        if not left:
            return []
        time.sleep(0.5)
    return left


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_server(tmp_path):
    config = write_config(tmp_path, "sigint", {"mode": "server", "engine": dict(ENGINE)},
                          {"mode": "server", "engine": MTP_PREFIX}, tasks=TASKS, limit=1200)
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    # output to files, not pipes: the run's end is its own exit, not that of whatever
    # process might hold a pipe's other end
    with out_path.open("w") as out, err_path.open("w") as err:
        # as a terminal's foreground job: SIGINT at its default (a suite run as a background
        # job of a non-interactive shell inherits SIGINT ignored, and Ctrl-C would do nothing)
        proc = subprocess.Popen([sys.executable, "-m", "evals", "ab", str(config), "--reports",
                                 str(tmp_path / "reports")], cwd=REPO, stdout=out, stderr=err,
                                text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                preexec_fn=_default_sigint)
    deadline = time.time() + 600
    servers: dict[int, str] = {}
    while time.time() < deadline and proc.poll() is None:
        # an arm's worker says "model ready" and writes its manifest once its server answers
        if "model ready" in out_path.read_text(encoding="utf-8") or \
                list(tmp_path.glob("reports/*/arms/*/manifest.json")):
            servers = _servers_of(proc.pid, tmp_path / "reports")
            if servers:
                break  # this run's server is up and serving
        time.sleep(0.5)
    assert servers, "the server never started:\n" + out_path.read_text(encoding="utf-8")[-2000:]
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        left = _servers_of(proc.pid, tmp_path / "reports")
        proc.kill()
        raise AssertionError(f"`ab` still running 120 s after SIGINT; its servers: {left}; "
                             + out_path.read_text(encoding="utf-8")[-3000:]) from None
    out, err = out_path.read_text(encoding="utf-8"), err_path.read_text(encoding="utf-8")
    assert proc.returncode == 4, out + err
    assert "interrupted" in err and "Traceback" not in err
    assert _alive(servers) == [], servers  # no server of this run outlives it


def _listening_ports(pids) -> set[int]:
    ports = set()
    for pid in pids:
        try:
            ports.update(c.laddr.port for c in psutil.Process(pid).net_connections("inet")
                         if c.status == psutil.CONN_LISTEN)
        except psutil.Error:
            continue
    return ports


def _still_listening(ports: set[int]) -> set[int]:
    for _ in range(20):
        left = {c.laddr.port for c in psutil.net_connections("inet")
                if c.status == psutil.CONN_LISTEN and c.laddr.port in ports}
        if not left:
            return set()
        time.sleep(0.5)
    return left


def _baseline_worker(pid: int) -> int:
    for child in psutil.Process(pid).children(recursive=True):
        cmdline = " ".join(child.cmdline())
        if "evals.runner.worker" in cmdline and "/baseline/" in cmdline:
            return child.pid
    raise AssertionError("no baseline worker under the run")


@pytest.mark.parametrize("victim", ["vllm serve", "worker"])
def test_a_killed_server_or_worker_leaves_no_engine_or_port_behind(tmp_path, victim):
    """As a user runs it (no fork server: `vllm serve` is the worker's child): SIGKILL to the
    baseline's `vllm serve`, or to its worker, while it serves. The run exits 4 naming the
    process that died, and nothing of the run is left: no API server, no engine core, no
    listening port (its engine core used to outlive a killed server, and a killed worker's
    server its worker)."""
    config = write_config(tmp_path, f"killed-{victim.split()[-1]}",
                          {"mode": "server", "engine": dict(ENGINE)},
                          {"mode": "server", "engine": MTP_PREFIX}, tasks=TASKS, limit=1200)
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    env = {k: v for k, v in os.environ.items() if k != FORK_SERVER_ENV}
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "evals", "ab", str(config), "--reports",
                                 str(tmp_path / "reports")], cwd=REPO, stdout=out, stderr=err,
                                text=True, env={**env, "PYTHONUNBUFFERED": "1"})
    deadline, servers = time.time() + 600, {}
    while time.time() < deadline and proc.poll() is None and not servers:
        if "model ready" in out_path.read_text(encoding="utf-8"):
            servers = _servers_of(proc.pid, tmp_path / "reports")
        time.sleep(0.5)
    assert servers, "the server never started:\n" + out_path.read_text(encoding="utf-8")[-2000:]
    assert len(servers) >= 2, servers  # the API server and its engine core
    ports = _listening_ports(servers)
    assert ports, servers
    # the leak check below finds this run's processes: its servers are among them now
    assert {int(line.split(":")[0]) for line in serving_processes(tmp_path)} >= set(servers)
    if victim == "worker":
        target = _baseline_worker(proc.pid)
    else:
        target = next(pid for pid, cmd in servers.items() if " serve " in f" {cmd} ")
    os.kill(target, signal.SIGKILL)
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("`ab` still running 300 s after the kill") from None
    out, err = out_path.read_text(encoding="utf-8"), err_path.read_text(encoding="utf-8")
    assert proc.returncode == 4, out + err
    assert "Traceback" not in err, err
    if victim == "worker":
        assert f"its worker (pid {target}) was killed by signal 9 (SIGKILL)" in err, err
    else:
        assert f"`vllm serve` (pid {target}) was killed by signal 9 (SIGKILL)" in out + err, \
            out + err
    assert _alive(servers) == [], servers
    assert _still_listening(ports) == set(), ports


def test_transformers_vs_an_endpoint_with_an_api_key(tmp_path, monkeypatch):
    """Cross-engine: lm-eval's `hf` backend vs an already-running OpenAI-compatible server
    that demands an API key. The key comes from the environment and is written nowhere."""
    from evals.runner.engine_lock import EngineLock
    from evals.runner.server import SERVED_NAME, VllmServer

    secret = "sk-evals-test-9f3a1c"
    # an outside server, started as a user would (not forked from the arms' fork server)
    env = {**{k: v for k, v in os.environ.items() if k != FORK_SERVER_ENV}, **CPU_ENV,
           "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    # the external engine takes its turn like an arm's (evals.runner.engine_lock); the
    # Transformers arm beside it takes none
    with EngineLock(), VllmServer(str(MODEL), {**ENGINE, "api_key": secret},
                                  tmp_path / "external.log", seed=1234, env=env) as server:
        config = write_config(
            tmp_path, "cross", {"mode": "hf", "engine": {"dtype": ENGINE["dtype"]}},
            {"mode": "endpoint", "base_url": f"{server.base_url}/v1",
             "api_key_env": "EVALS_TEST_API_KEY", "served_model_name": SERVED_NAME,
             "concurrency": 4},
            tasks=[{"name": "tiny_reviews_gen", "metric": "exact_match"},
                   {"name": "tiny_reviews_mc", "metric": "acc"}], limit=40)
        monkeypatch.setenv("EVALS_TEST_API_KEY", secret)
        result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"))
    assert result.returncode in (0, 1, 3), result.stdout + result.stderr
    summary = read_summary(tmp_path / "reports")
    assert "lm-eval `hf` backend" in summary["arms"]["baseline"]["backend"]
    assert summary["arms"]["candidate"]["backend"].startswith(f"endpoint {server.base_url}")
    assert all(t["n"] == 40 for t in summary["tasks"])
    # the endpoint's generation requests were streamed and timed; Transformers is not timed
    run_dir = next((tmp_path / "reports").glob("*/summary.json")).parent
    timed = json.loads((run_dir / "arms/candidate/speed/tiny_reviews_gen.json").read_text())
    assert len(timed["requests"]) == 40 and all(r["ttft"] > 0 for r in timed["requests"])
    assert not (run_dir / "arms/baseline/speed").exists() and summary["speed"] is None
    gen = next(t for t in summary["tasks"] if t["task"] == "tiny_reviews_gen")
    assert gen["baseline_mean"] > 0.5 and gen["candidate_mean"] > 0.5  # both engines work
    for path in (tmp_path / "reports").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(encoding="utf-8", errors="replace"), path
    assert secret not in result.stdout + result.stderr
