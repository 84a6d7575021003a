"""Errors that reach the user as one sentence and an exit code, never a traceback."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes, documented in the README."""

    PASS = 0
    REGRESSION = 1
    BAD_INPUT = 2
    INCONCLUSIVE = 3
    RUN_FAILED = 4


class UserError(Exception):
    """Bad input or usage: a message naming what is wrong and where. Exit code 2."""

    exit_code = ExitCode.BAD_INPUT


class RunFailed(Exception):
    """An arm's engine or evaluation failed. Exit code 4; finished work stays on disk."""

    exit_code = ExitCode.RUN_FAILED
