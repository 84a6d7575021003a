"""Fault canaries: deliberate, seeded accuracy faults injected into a vLLM engine, modeled on
real vLLM bugs, so that the gate can be seen to catch what it exists for.

`evals.faults.catalog` (pure: names, rates, what each fault needs, the env hand-off) is what
the rest of the suite uses. `evals.faults.vllm_plugin` is a vLLM general plugin (entry point
`vllm.general_plugins`): vLLM loads it in its engine-core and worker processes, where it
patches nothing unless the arm's environment asks for a fault.
"""

from evals.faults.catalog import (ENV_VAR, FAULTS, SUPPORTED_VLLM, FaultInfo, check_applies,
                                  decode_env, encode_env, fault_fires)

__all__ = ["ENV_VAR", "FAULTS", "SUPPORTED_VLLM", "FaultInfo", "check_applies",
           "decode_env", "encode_env", "fault_fires"]
