"""The canary's plan: which faults apply to what a config's candidate enables, each fault's
config (the candidate with the fault injected), and the arms' runner on a GPU."""

from __future__ import annotations

from pydantic import ValidationError

from evals.errors import UserError
from evals.plan.fault_catalog import FAULTS
from evals.plan.config import ABConfig, ArmConfig, Arms
from evals.plan.optimizations import FP8_KV_CACHE, PREFIX_CACHING, SPEC_DECODE, declared_optimizations


def default_faults(config: ABConfig) -> list[dict]:
    """The faults that apply to what the candidate enables (and the benign control)."""
    declared = declared_optimizations(config.arm("baseline").engine,
                                      config.arm("candidate").engine)
    faults = []
    if PREFIX_CACHING in declared:
        faults.append({"name": "prefix_hit_overrun",
                       # the #43559 interaction: only where speculative decoding is on too
                       "only_with_spec_decode": SPEC_DECODE in declared})
        faults.append({"name": "prefix_key_collision"})
    if SPEC_DECODE in declared:
        faults.append({"name": "spec_unverified"})
    if FP8_KV_CACHE in declared:
        faults.append({"name": "kv_scale"})
    faults.append({"name": "benign_tie_noise"})
    return faults


def parse_fault_args(values: list[str]) -> list[dict]:
    """`NAME` or `NAME=RATE` from the command line."""
    faults = []
    for value in values:
        name, sep, rate = value.partition("=")
        if name not in FAULTS:
            raise UserError(f"--faults: unknown fault {name!r}; known: {', '.join(FAULTS)}.")
        fault: dict = {"name": name}
        if sep:
            try:
                fault["rate"] = float(rate)
            except ValueError:
                raise UserError(f"--faults: rate of {name} must be a number in (0, 1], "
                                f"got {rate!r}.") from None
        faults.append(fault)
    return faults


V1_RUNNER_ENV = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
"""On a GPU, vLLM's default model runner is Model Runner V2 (v1/worker/gpu/model_runner.py,
its own sampler and rejection sampler); the faults that live in sampling (spec_unverified,
benign_tie_noise) patch the V1 runner's. A canary on a GPU runs every arm, clean and
faulty, with the V1 runner, and says so (canary.json `runner`)."""


def with_v1_runner(config: ABConfig) -> ABConfig:
    """Both arms with VLLM_USE_V2_MODEL_RUNNER=0 (unless an arm sets it itself)."""
    arms = {name: config.arm(name).model_copy(update={"env": {**V1_RUNNER_ENV,
                                                             **config.arm(name).env}})
            for name in ("baseline", "candidate")}
    return config.model_copy(update={"arms": Arms(**arms)})


def faulty_config(config: ABConfig, fault: dict) -> ABConfig:
    """The config with `fault` injected into the candidate arm (validated like a config:
    an unknown fault, a rate outside (0, 1] or a fault that cannot apply is bad input)."""
    candidate = config.arm("candidate")
    try:
        arm = ArmConfig.model_validate({**candidate.model_dump(), "faults": [fault]})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise UserError(f"{config.source}: fault {fault.get('name')!r} for arms.candidate"
                        f"{'.' + where if where else ''}: "
                        f"{error['msg'].removeprefix('Value error, ')}.") from None
    suffix = fault["name"] + ("-spec" if fault.get("only_with_spec_decode") else "")
    return config.model_copy(update={"name": f"{config.name}-canary-{suffix}",
                                     "arms": Arms(baseline=config.arm("baseline"),
                                                  candidate=arm)})
