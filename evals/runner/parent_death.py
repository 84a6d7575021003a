"""A child process (worker, server, fork server) that dies with its parent: started by the
launcher, the server and the fork server alike, so it sits below all three."""

from __future__ import annotations

import ctypes
import signal


def terminate_with_parent() -> None:
    """In a child (worker, server), before exec: Linux sends it SIGTERM if its parent dies,
    even by SIGKILL, so no engine or server outlives the run that started it (the worker
    turns SIGTERM into a clean stop of its server)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the launcher's own cleanup still applies
        pass
