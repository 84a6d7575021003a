"""The engine config vLLM would use for an arm, resolved without starting an engine.

`python -m evals.runner.config_resolver SPEC_JSON` (SPEC_JSON: `{"model": ..., "engine": {...},
"seed": ..., "mode": "offline" | "server"}`) builds vLLM's `EngineArgs` from the arm's model
and engine arguments as the arm passes them on (offline: through lm-eval's `VLLM` to
`vllm.LLM`; server: as `vllm serve` flags) and resolves them with `create_engine_config` and
the same usage context: configuration files only - no weights, no KV cache, no worker
processes. It prints one line, `[evals-config-audit] {json}`, holding the flattened effective
config (or the error vLLM raised), the names of vLLM's engine arguments, the warnings vLLM
logged while resolving, and the seconds it took.

`resolve_arms` runs that command once per distinct worker environment (`launch.worker_env`)
for all arms that share it, so the parent never imports vLLM; `recorded_arms` skips it when
every arm already ran and its worker recorded the effective config. An offline arm's worker
can resolve too, once it has imported vLLM anyway (evals.runner.worker, asked by the
parent): the same `resolve_report`, without a process of its own.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from evals.plan.arm_spec import ArmSpec
from evals.runner.effective_config import flatten_vllm_config
from evals.runner.engine_lock import EngineLock
from evals.runner.engine_call import offline_engine_args, server_call
from evals.plan.engine_workarounds import ENV_VAR as WORKAROUNDS_ENV
from evals.plan.fault_catalog import ENV_VAR as FAULTS_ENV
from evals.runner.launch import FAULT_TALLY_ENV, start_python, stop_process_group, worker_env
from evals.runner.model_inspection import inspect_in_forks

RESULT_PREFIX = "[evals-config-audit] "
# vLLM inspects a model class it has not met before in a subprocess of its own (a fresh
# interpreter importing vLLM: ~10 CPU-seconds on a 2-core machine) and caches the answer
# on disk; a run's arms resolve at once (the next arm while the first starts its engine),
# and on a new machine each would pay it. One resolution at a time per user: the second
# reads the first's cache.
RESOLVE_LOCK = Path(tempfile.gettempdir()) / f"evals-resolve-{os.getuid()}.lock"
RESOLVABLE_MODES = ("offline", "server")  # endpoint and hf arms have no vLLM engine config
DEFAULT_TIMEOUT = 300.0  # seconds per arm; a hub model's config may have to be downloaded


@dataclass(frozen=True, slots=True)
class ResolvedArm:
    """One arm's resolved engine config, or why it could not be resolved."""

    arm: str
    effective: dict | None
    error: str | None
    engine_arg_names: tuple[str, ...]
    vllm_warnings: tuple[str, ...]
    seconds: float  # importing vLLM and resolving, in the arm's process
    resolve_seconds: float = 0.0  # create_engine_config alone
    peak_rss_mb: float = 0.0  # the arm's process and its helpers; no weights, no KV cache
    resolved_in: str = "a resolver process"  # or "the arm's worker", "the arm's manifest"


# ---- child side (imports vLLM) ----

def resolve_effective(model: str, engine: dict, *, seed: int | None = None,
                      mode: str = "offline") -> dict:
    """Flat {section.field: value} of the VllmConfig these arguments resolve to.

    Raises whatever vLLM raises for arguments it rejects or cannot honour on this machine.
    """
    return _resolve(model, engine, seed, mode)[0]


def _engine_args(model: str, engine: dict, seed: int | None, mode: str):
    """vLLM's EngineArgs and usage context (some defaults depend on it) for this arm's mode."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    if mode == "server":  # `vllm serve MODEL --seed S --served-model-name N <engine flags>`
        from evals.runner.engine_args import parse_engine_args
        from evals.runner.server import SERVED_NAME

        flags = {**engine, "seed": seed, "served_model_name": SERVED_NAME}
        return parse_engine_args(model, flags), UsageContext.OPENAI_API_SERVER
    # `engine` is already the call's (evals.runner.engine_call.offline_engine_args)
    return EngineArgs(model=model, **engine), UsageContext.LLM_CLASS


@contextmanager
def one_resolution_at_a_time(path: Path | None = None) -> Iterator[None]:
    """Holds the user's resolve lock (`path`, else RESOLVE_LOCK); without a writable
    temporary folder, nothing is locked."""
    with EngineLock(str(path or RESOLVE_LOCK), optional=True):
        yield


def _resolve(model: str, engine: dict, seed: int | None, mode: str) -> tuple[dict, list[str]]:
    """The flattened config and the warnings vLLM logged while resolving it."""
    from evals.runner.vllm_compat import configure_logging

    args, usage_context = _engine_args(model, engine, seed, mode)
    # as vllm.LLM does (releases that configure logging at import need nothing); attaching
    # our handler afterwards, since this replaces the handlers
    configure_logging(args)
    # vLLM logs some warnings once per process: forget the earlier arm's, so that each arm
    # resolved in this process gets its own (else the audit reports the first arm's only)
    once = getattr(importlib.import_module("vllm.logger"), "_print_warning_once", None)
    if hasattr(once, "cache_clear"):
        once.cache_clear()
    collect = _Collect()
    logger = logging.getLogger("vllm")
    logger.addHandler(collect)
    try:
        with one_resolution_at_a_time():
            config = args.create_engine_config(usage_context)
    finally:
        logger.removeHandler(collect)
    return flatten_vllm_config(config), collect.messages


def engine_arg_names() -> tuple[str, ...]:
    from vllm.engine.arg_utils import EngineArgs

    return tuple(sorted(f.name for f in dataclasses.fields(EngineArgs) if not f.name.startswith("_")))


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message not in self.messages:
            self.messages.append(message)


def resolve_report(spec: dict) -> dict:
    """The JSON-able result for one arm; failures become `error`, never an exception."""
    started = time.time()
    effective, error, names, warnings, resolve_seconds = None, None, (), [], 0.0
    try:
        names = engine_arg_names()
        resolve_started = time.time()
        effective, warnings = _resolve(spec["model"], dict(spec.get("engine") or {}),
                                       spec.get("seed"), spec.get("mode") or "offline")
        resolve_seconds = time.time() - resolve_started
    except Exception as exc:  # any failure (GPU-only config on CPU, hub offline) -> fallback
        text = " ".join(str(exc).split())  # one line; vLLM's messages can span several
        error = f"{type(exc).__name__}: {text[:300]}"
    return {"effective": effective, "error": error, "engine_arg_names": list(names),
            "vllm_warnings": warnings, "seconds": round(time.time() - started, 3),
            "resolve_seconds": round(resolve_seconds, 3), "peak_rss_mb": _peak_rss_mb()}


def _peak_rss_mb() -> float:
    """Peak resident memory of this process or of a helper it waited for (vLLM inspects
    model classes in a subprocess), in MiB (Linux reports KiB)."""
    peak = max(resource.getrusage(who).ru_maxrss
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return round(peak / 1024, 1)


def main(argv: list[str]) -> int:
    """SPEC_JSON is one arm's spec or a list of them: every arm that shares an environment
    is resolved in one process, so vLLM is imported once."""
    if len(argv) != 1:
        print("usage: python -m evals.runner.config_resolver SPEC_JSON", file=sys.stderr)
        return 2
    payload = json.loads(argv[0])
    inspect_in_forks()  # forked by a fork server: so are vLLM's model-class inspections
    for spec in payload if isinstance(payload, list) else [payload]:
        report = resolve_report(spec)
        print(RESULT_PREFIX + json.dumps(report, default=str), flush=True)
    return 0


# ---- parent side (no vLLM import) ----

def resolver_input(spec: ArmSpec) -> dict:
    """What `resolve_report` needs of an arm: the engine arguments of the call its worker
    makes (evals.runner.engine_call, LoRA settings included)."""
    mode = getattr(spec, "mode", "offline")
    engine = server_call(spec)[0] if mode == "server" else offline_engine_args(spec)
    return {"model": spec.model, "engine": engine, "seed": spec.seed, "mode": mode}


def resolution_env(spec: ArmSpec) -> dict[str, str]:
    """The environment an arm's config resolves in: its worker's, without the suite's own
    canary variables (they patch vLLM's internals at run time, not its config)."""
    return {k: v for k, v in worker_env(spec).items() if k not in (FAULTS_ENV, FAULT_TALLY_ENV,
                                                             WORKAROUNDS_ENV)}


def from_report(arm: str, data: dict, resolved_in: str = "a resolver process") -> ResolvedArm:
    """A `resolve_report` result as a ResolvedArm."""
    return ResolvedArm(arm=arm, effective=data["effective"], error=data["error"],
                       engine_arg_names=tuple(data["engine_arg_names"]),
                       vllm_warnings=tuple(data["vllm_warnings"]), seconds=data["seconds"],
                       resolve_seconds=data["resolve_seconds"], peak_rss_mb=data["peak_rss_mb"],
                       resolved_in=resolved_in)


def _parse(arm: str, output: str, code: int, wall_seconds: float, index: int = 0
           ) -> ResolvedArm:
    """The `index`-th result line of a resolver process's output."""
    lines = output.splitlines()
    results = [line for line in lines if line.startswith(RESULT_PREFIX)]
    result = results[index] if index < len(results) else None
    if result is None:
        tail = " | ".join(line.strip() for line in lines[-5:] if line.strip())
        return ResolvedArm(arm, None, f"config resolution exited with code {code}: {tail}",
                           (), (), round(wall_seconds, 3))
    return from_report(arm, json.loads(result[len(RESULT_PREFIX):]))


def resolve_arms(specs: dict[str, ArmSpec], *, timeout: float = DEFAULT_TIMEOUT
                 ) -> dict[str, ResolvedArm]:
    """Resolves every arm's effective engine config without starting an engine.

    Arms whose worker environments are equal share one process (one vLLM import); arms
    with different environments get one process each, side by side. A timeout or a crash
    becomes the arm's `error`; nothing is raised for vLLM's own failures.
    """
    groups: dict[str, tuple[dict, list[str]]] = {}
    resolved: dict[str, ResolvedArm] = {}
    for name, spec in specs.items():
        mode = getattr(spec, "mode", "offline")
        if mode not in RESOLVABLE_MODES:
            resolved[name] = ResolvedArm(name, None, f"a `{mode}` arm has no vLLM engine "
                                         "config to resolve", (), (), 0.0)
            continue
        env = worker_env(spec)
        groups.setdefault(json.dumps(env, sort_keys=True), (env, []))[1].append(name)
    procs: list[tuple[list[str], subprocess.Popen]] = []
    started = time.time()
    try:
        for env, names in groups.values():
            payload = json.dumps([resolver_input(specs[n]) for n in names], default=str)
            procs.append((names, start_python(
                ["-m", "evals.runner.config_resolver", payload], env, forkable=True,
                echo=lambda line: None, label="config audit")))
        for names, proc in procs:
            try:
                output, _ = proc.communicate(timeout=max(1.0, started + timeout - time.time()))
            except subprocess.TimeoutExpired:
                stop_process_group(proc)
                for name in names:
                    resolved[name] = ResolvedArm(name, None, f"config resolution did not "
                                                 f"finish in {timeout:.0f} s", (), (),
                                                 round(timeout, 3))
                continue
            for index, name in enumerate(names):
                resolved[name] = _parse(name, output, proc.returncode, time.time() - started,
                                        index)
        return {name: resolved[name] for name in specs}
    finally:
        for _, proc in procs:
            stop_process_group(proc, timeout=5.0)


def recorded_arms(manifests: dict[str, dict]) -> dict[str, ResolvedArm] | None:
    """The arms' effective configs as their workers recorded them, when every arm has
    finished and recorded one (with vLLM's engine-argument names): the audit then needs no
    resolver process. None when any arm lacks them."""
    found = {}
    for name, manifest in manifests.items():
        effective, names = manifest.get("effective_engine_config"), manifest.get(
            "engine_arg_names")
        if not effective or not names:
            return None
        found[name] = ResolvedArm(name, effective, None, tuple(names), (), 0.0,
                                  resolved_in="the arm's manifest")
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
