"""What a worker imports: each arm mode's lm-eval backend module, and what a fork server
(evals.runner.fork_server) imports once for the workers - and `vllm serve` processes - it
forks."""

from __future__ import annotations

BACKEND_MODULES = {"offline": "lm_eval.models.vllm_causallms", "hf": "lm_eval.models.huggingface",
                   "server": "lm_eval.models.openai_completions",
                   "endpoint": "lm_eval.models.openai_completions"}

# An offline worker's imports, done once by a fork server when EVALS_FORK_SERVER is set, and
# (`module:function` entries, called once) lm-eval's environment report, computed once for
# them all. Nothing of vLLM's engine start (engine core, scheduler, CPU worker) is imported
# ahead: a child forked after that preload died at its first forward pass on an Intel Xeon
# with AMX (issue 49), for 0.66 s saved per engine start in the tests only.
FORK_MODULES = ("lm_eval.tasks", "lm_eval.evaluator", BACKEND_MODULES["offline"],
                "evals.runner.backends", "evals.runner.config_resolver",
                "evals.runner.chunk_merge", "evals.pair.samples", "evals.plan.schedule",
                "evals.runner.lm_eval_env:cache_env_info")
