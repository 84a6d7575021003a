"""The run stage, parent side: arm specs, results reused from the run store, each arm run
through the runner (evals.runner, the only code that imports lm-eval and vLLM)."""
