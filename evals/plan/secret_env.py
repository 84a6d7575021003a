"""Which of an arm's environment variables are secrets, and what records hold instead.

A variable whose name contains one of SECRET_WORDS (case-insensitive), or one of the
config's `secret_env_names`, or that the arm reads with `env_from`, is a secret: records
(spec.json, summary.json, the store's manifest, reports, logs, CI outputs) keep its name and
a marker with a salted hash of its value (`redacted`), so an arm's content key still
changes with the value; the real value reaches the arm's processes only through their
environment (`ArmSpec.secret_env`, evals.runner.launch.worker_env). evals.plan.arm_env
splits an arm's environment so.

The salt is fixed: this project's name plus the variable's name. A salt per machine or per
store would give the same value another content key elsewhere (a CI runner with a fresh
cache, another `--store`), and stored results would never be reused. A fixed salt makes
the hash a public function, so it is PBKDF2 (slow on purpose): a high-entropy token cannot
be found from it, and guessing a weak password costs a PBKDF2 per guess.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping

SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH", "COOKIE")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MARKER_PREFIX = "<redacted "
_SALT = b"vllm-regression-evals secret env\0"
_ITERATIONS = 200_000  # ~0.05 s per value here; computed once per value and name


def is_secret(name: str, extra_words: Iterable[str] = ()) -> bool:
    """Whether a variable's value is a secret: its name contains one of SECRET_WORDS or of
    `extra_words` (the config's `secret_env_names`), case-insensitively."""
    upper = name.upper()
    return any(word.upper() in upper for word in (*SECRET_WORDS, *extra_words))


def is_marker(value: str) -> bool:
    return value.startswith(MARKER_PREFIX) and value.endswith(">")


@functools.lru_cache(maxsize=256)
def redacted(name: str, value: str) -> str:
    """What records hold for a secret: a marker with a salted hash of the value (salted with
    the project's name and the variable's; see the module docstring). A marker stays as it is."""
    if is_marker(value):
        return value
    digest = hashlib.pbkdf2_hmac("sha256", value.encode(), _SALT + name.encode(), _ITERATIONS)
    return f"{MARKER_PREFIX}pbkdf2-sha256:{digest.hex()[:16]}>"


def redact_env(env: Mapping[str, str], extra_words: Iterable[str] = ()) -> dict[str, str]:
    """`env` with every secret's value replaced by its marker (`redacted`)."""
    extra = tuple(extra_words)
    return {name: redacted(name, value) if is_secret(name, extra) else value
            for name, value in env.items()}
