"""What a worker imports: each arm mode's lm-eval backend module, and what a fork server
(evals.runner.fork_server) imports once for the workers - and `vllm serve` processes - it
forks."""

from __future__ import annotations

BACKEND_MODULES = {"offline": "lm_eval.models.vllm_causallms", "hf": "lm_eval.models.huggingface",
                   "server": "lm_eval.models.openai_completions",
                   "endpoint": "lm_eval.models.openai_completions"}

# An offline worker's imports, done once by a fork server when EVALS_FORK_SERVER is set, and
# (`module:function` entries, called once) lm-eval's environment report, computed once for
# them all, and on a CPU what vLLM imports when it starts an engine (its engine core,
# scheduler and CPU worker: ~0.5 s of every forked arm's engine turn on a 2-core CPU)
FORK_MODULES = ("lm_eval.tasks", "lm_eval.evaluator", BACKEND_MODULES["offline"],
                "evals.runner.backends", "evals.runner.config_resolver",
                "evals.runner.chunk_merge", "evals.pair.samples", "evals.plan.schedule",
                "evals.runner.lm_eval_env:cache_env_info",
                "evals.runner.vllm_compat:import_engine_modules")
