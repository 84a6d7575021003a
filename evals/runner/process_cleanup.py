"""Stopping what an arm started, whatever died first.

An arm's worker leads a session of its own (evals.runner.launch.start_python); everything
it starts stays in that session: its `vllm serve` (a process group of its own inside the
session, evals.runner.server), vLLM's engine core and helpers, multiprocessing's resource
tracker. A process whose parent died is re-parented to init, and a process group whose
leader died has no leader to signal, but both keep their session: `sweep_session` finds
them by it. Linux only (`os.getsid`); elsewhere it finds nothing.
"""

from __future__ import annotations

import os
import signal
import time

import psutil


def kill_process_group(pgid: int, grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL `grace` seconds later, to a process group whose leader may be
    gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.1)


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:  # gone, or not ours
        return None


def resource_tracker(process: psutil.Process) -> bool:
    """multiprocessing's resource tracker: it ends by itself once every process it tracks
    for has exited (and then frees what they left), so it is given time before a signal."""
    try:
        return "multiprocessing.resource_tracker" in " ".join(process.cmdline())
    except psutil.Error:  # gone, or not ours to read
        return False


def session_members(sid: int) -> list[psutil.Process]:
    """The live processes of session `sid`, this process left out."""
    found = []
    for process in psutil.process_iter():
        if process.pid != os.getpid() and _session_of(process.pid) == sid:
            try:
                if process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process)
            except psutil.Error:
                continue
    return found


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} ({' '.join(process.cmdline())[:80] or process.name()})"
    except psutil.Error:
        return str(process.pid)


def stop_processes(processes: list[psutil.Process]) -> None:
    """SIGTERM, then SIGKILL to those still alive 5 s later."""
    for name in ("terminate", "kill"):
        for process in processes:
            try:
                getattr(process, name)()
            except psutil.Error:
                pass
        _, processes = psutil.wait_procs(processes, timeout=5.0)
        if not processes:
            return


def sweep_session(sid: int, tracker_grace: float = 5.0) -> list[str]:
    """Stops every process left in session `sid` (SIGTERM, then SIGKILL 5 s later); a
    resource tracker first gets `tracker_grace` seconds to end by itself. Returns what had
    to be stopped, as "pid (command line)"."""
    members = session_members(sid)
    trackers = [p for p in members if resource_tracker(p)]
    others = [p for p in members if p not in trackers]
    found = [_describe(p) for p in others]
    stop_processes(others)
    _, trackers = psutil.wait_procs(trackers, timeout=tracker_grace) if trackers else ([], [])
    found += [_describe(p) for p in trackers]
    stop_processes(trackers)
    return found


def exit_description(code: int | None) -> str:
    """"exited with code 3", or "was killed by signal 9 (SIGKILL)" for Popen's negative
    codes."""
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by signal {-code} ({name})"
    return f"exited with code {code}"
