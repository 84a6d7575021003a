"""Checking engine arguments with vLLM's own parser, without starting an engine.

Each arm's `engine:` mapping is turned into `vllm serve` style flags and parsed by
the parser vLLM builds from `EngineArgs.add_cli_args`, so unknown names, wrong
types and values outside vLLM's choices are caught exactly as vLLM would catch them.
This is how configs for GPU deployments are checked on a CPU-only machine.
"""

from __future__ import annotations

import contextlib
import io
import json

from evals.plan.config import ABConfig
from evals.errors import UserError


def engine_flags(engine: dict) -> list[str]:
    flags: list[str] = []
    for key, value in engine.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            flags.append("--no-" + key.replace("_", "-"))
        elif value is None:
            continue
        elif isinstance(value, (dict, list)):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def parse_engine_args(model: str, engine: dict):
    """Returns vLLM's EngineArgs for these arguments or raises ValueError with vLLM's message."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = EngineArgs.add_cli_args(FlexibleArgumentParser(prog="vllm"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            namespace = parser.parse_args(["--model", model] + engine_flags(engine))
    except SystemExit:
        message = err.getvalue().strip().splitlines()
        raise ValueError(message[-1] if message else "rejected by vLLM's parser") from None
    try:
        return EngineArgs.from_cli_args(namespace)
    except Exception as exc:
        # vLLM 0.26 resolves a hub id's snapshot when it builds EngineArgs: offline, or for a
        # GPU config's model that this machine has never downloaded, that lookup fails
        # although every flag parsed. The parsed flags are the check's answer then.
        if type(exc).__module__.startswith("huggingface_hub"):
            return namespace
        raise


def check_config_engine_args(config: ABConfig, names: dict[str, str] | None = None
                             ) -> list[str]:
    """Each arm's engine arguments through vLLM's parser. `names`: the arms to check (role
    -> the name shown, e.g. a study's arm name); default both, under their own names."""
    lines = []
    for arm, shown_name in (names or {"baseline": "baseline", "candidate": "candidate"}).items():
        engine = config.arm(arm).engine
        try:
            parsed = parse_engine_args(config.arm_model(arm), engine)
        except ValueError as exc:
            raise UserError(f"{config.source}: arms.{shown_name}.engine: {exc}") from None
        shown = {k: getattr(parsed, k) for k in engine}
        lines.append(f"{config.source}: arms.{shown_name}.engine accepted by vLLM: {shown}")
    return lines
