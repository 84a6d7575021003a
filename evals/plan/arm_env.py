"""An arm's environment from its config, split into what records hold (secrets as
markers, evals.plan.secret_env) and the secrets' real values, which only the arm's
processes get."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from evals.errors import UserError
from evals.plan.config import ABConfig
from evals.plan.engine_workarounds import ENV_VAR as WORKAROUNDS_ENV
from evals.plan.engine_workarounds import env_value
from evals.plan.secret_env import is_secret, redacted


@dataclass(frozen=True, slots=True)
class ArmEnv:
    """One arm's environment, split: what records hold, and the real values of its secrets."""

    recorded: dict[str, str]
    """The arm's variables (`env` and `env_from`), secrets as markers: spec.json, the key."""
    secrets: dict[str, str]
    """The secrets' real values: for the arm's processes' environment only, never written."""


def arm_env(config: ABConfig, arm: str, environ: Mapping[str, str] | None = None) -> ArmEnv:
    """The arm's `env` plus the variables it names in `env_from`, read from `environ` (this
    process's environment); an `env_from` variable is always a secret. A variable that
    `env_from` names and `environ` lacks is bad input."""
    environ = os.environ if environ is None else environ
    settings = config.arm(arm)
    missing = [name for name in settings.env_from if name not in environ]
    if missing:
        raise UserError(f"{config.source}: arms.{arm}.env_from names {missing[0]}, which is not "
                        "set in this environment; export it before the run (its value is "
                        "passed to the arm's processes and never written).")
    words = tuple(config.secret_env_names)
    secrets = {name: value for name, value in settings.env.items() if is_secret(name, words)}
    secrets.update({name: environ[name] for name in settings.env_from})
    recorded = {**settings.env, **{name: redacted(name, value) for name, value in secrets.items()}}
    if settings.engine_workarounds:  # recorded: in spec.json and every task's content key
        recorded[WORKAROUNDS_ENV] = env_value(settings.engine_workarounds)
    return ArmEnv(recorded=recorded, secrets=secrets)


def inline_secret_warnings(config: ABConfig, arms: Iterable[str]) -> list[str]:
    """One warning per arm that sets a secret's value in the config file itself."""
    words = tuple(config.secret_env_names)
    warnings = []
    for arm in arms:
        names = sorted(n for n in config.arm(arm).env if is_secret(n, words))
        if names:
            listed = ", ".join(names)
            warnings.append(
                f"{config.source}: arms.{arm}.env sets {listed} inline; the value is kept out "
                "of every record, report and log, but the config file holds it. Export it in "
                f"the shell and write `env_from: [{listed}]` in the arm instead.")
    return warnings
