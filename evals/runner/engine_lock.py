"""One engine at a time across processes, when asked for.

With `EVALS_ENGINE_LOCK` set to a file path, every vLLM engine an arm's worker starts (its
offline engine, or its `vllm serve`) holds an exclusive lock on that file for as long as
the worker lives; another run's engine waits for it. A run already starts its own arms
one at a time (evals.runner.launch); the lock extends that to every run on the machine
that sets the same path - several `ab` runs queued on one small machine, or the test
suite's two workers. The kernel drops the lock when the holder exits, however it exits.
Unset (the default), nothing is locked: GPU machines run arms side by side.

The same lock, on another file, lets one process at a time resolve vLLM's engine config
(evals.runner.config_resolver.one_resolution_at_a_time); that one is a courtesy, so a
file that cannot be opened there locks nothing (`optional=True`).
"""

from __future__ import annotations

import fcntl
import os
import time

ENGINE_LOCK_ENV = "EVALS_ENGINE_LOCK"


class EngineLock:
    """`with EngineLock():` holds the machine's engine lock (if `EVALS_ENGINE_LOCK` is set);
    `waited_seconds` says how long it took to get it. With `optional`, a lock file that
    cannot be opened (no writable folder) locks nothing instead of raising."""

    def __init__(self, path: str | None = None, *, optional: bool = False):
        self.path = path if path is not None else os.environ.get(ENGINE_LOCK_ENV) or None
        self.optional = optional
        self.waited_seconds = 0.0
        self._fd: int | None = None

    def __enter__(self) -> EngineLock:
        if self.path:
            started = time.time()
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError:
                if not self.optional:
                    raise
                return self
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            self.waited_seconds = time.time() - started
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file releases the lock
            self._fd = None
