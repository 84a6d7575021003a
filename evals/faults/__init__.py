"""Fault canaries: deliberate, seeded accuracy faults injected into a vLLM engine, modeled on
real vLLM bugs, so that the gate can be seen to catch what it exists for.

`evals.faults.vllm_plugin` is a vLLM general plugin (entry point `vllm.general_plugins`):
vLLM loads it in its engine-core and worker processes, where it patches nothing unless the
arm's environment asks for a fault. What a config may ask for (names, rates, what each fault
needs, the env hand-off) is the plan's: `evals.plan.fault_catalog`.
"""
