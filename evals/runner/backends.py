"""The model an arm's tasks run against, one per arm mode, with its speed instruments.

* offline  - lm-eval's `vllm` backend (vLLM's LLM in this process); per-request
  latencies come from vLLM's request metrics (`RequestOutput.metrics`).
* server   - `vllm serve` on a free loopback port (evals.runner.server), lm-eval's
  `local-completions` backend against it through the timing proxy
  (evals.runner.stream_proxy), which streams each generation request.
* endpoint - an already-running OpenAI-compatible server (base_url): the same
  backend and proxy, no engine of ours. Its API key comes from the environment.
* hf       - lm-eval's Transformers backend (`hf`); no speed instruments.

Every backend is opened inside an ExitStack, so leaving the worker - normally, by an
error, or by SIGINT/SIGTERM - stops the server and the proxy.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

from evals.plan.arm_spec import ArmSpec
from evals.runner.effective_config import effective_engine_config
from evals.runner.engine_call import offline_call, server_call
from evals.runner.layout import ArmLayout
from evals.runner.logprob_capture import Capture, generation_params, wrap_generate_until
from evals.runner.prompt_settings import sampled_with_seeds, use_template_text
from evals.runner.sample_seeds import SampleSeeds
from evals.runner.vllm_compat import shutdown_engine
from evals.runner.worker_imports import BACKEND_MODULES


@dataclass
class Backend:
    lm: object
    effective_config: dict | None
    engine_start_seconds: float
    description: str
    timings: list[dict] = field(default_factory=list)
    """Per-request {"ttft", "e2e", "output_tokens"} since the last `take_timings`."""
    take_proxy_timings: object = None
    read_counters: object = None
    stats: dict = field(default_factory=lambda: {"generated_tokens": 0, "requests": 0,
                                                 "finish_reasons": {}})
    capture: Capture | None = None
    """The generations' top-k log-probabilities (offline arms with `logprobs: k`)."""
    seeds: SampleSeeds | None = None
    """Offline arms that sample: the per-request seeds (evals.runner.sample_seeds)."""
    server_died: object = None
    """Server arms: `VllmServer.died` (None while `vllm serve` runs, else what ended it)."""
    server_url: str | None = None
    """Server arms: the loopback URL of the arm's `vllm serve` (its load sweep's target)."""
    served_name: str | None = None
    """Server arms: the model name requests give (the LoRA adapter's, where served)."""

    def take_timings(self) -> list[dict]:
        if self.take_proxy_timings is not None:
            for t in self.take_proxy_timings():
                self.timings.append({"ttft": t.ttft, "e2e": t.e2e,
                                     "output_tokens": t.output_tokens})
                self.stats["generated_tokens"] += t.output_tokens
                self.stats["requests"] += 1
        taken, self.timings = self.timings, []
        return taken

    def counters(self) -> dict:
        """vLLM's cumulative counters (EXERCISE_COUNTERS); {} where the backend has none."""
        try:
            return self.read_counters() if self.read_counters else {}
        except Exception:  # metrics are optional; a missing collector must not fail the arm
            return {}

    def spec_decode(self) -> dict:
        return {k: v for k, v in self.counters().items() if k.startswith("vllm:spec_decode")}


def _request_timing(out) -> dict | None:
    """TTFT and end-to-end latency of one offline request from vLLM's request metrics."""
    if getattr(out, "prompt_logprobs", None) is not None:
        return None  # a scoring (loglikelihood) request: not timed, as in server mode
    m = getattr(out, "metrics", None)
    if m is None or not getattr(m, "first_token_latency", 0):
        return None
    tokens = sum(len(c.token_ids) for c in out.outputs)
    decode = max(0.0, float(m.last_token_ts - m.first_token_ts))
    return {"ttft": float(m.first_token_latency), "e2e": float(m.first_token_latency) + decode,
            "output_tokens": tokens}


def _constrain(sampling_params, structured: dict) -> None:
    """Structured output on the generation requests (scoring requests are left alone)."""
    from vllm.sampling_params import StructuredOutputsParams

    for sp in generation_params(sampling_params):
        sp.structured_outputs = StructuredOutputsParams(**structured)


def _instrument(llm, backend: Backend, progress_cls, structured: dict | None = None) -> None:
    """Counts tokens and finish reasons, keeps request timings; swaps vLLM's progress bar;
    seeds each sampled request; applies the arm's structured output; asks for and keeps
    top-k log-probabilities."""
    original = llm.generate
    capture = backend.capture

    def generate(*args, **kwargs):
        if kwargs.get("use_tqdm"):
            kwargs["use_tqdm"] = progress_cls
        if backend.seeds is not None:
            args, kwargs = _with_seeds(backend.seeds, args, kwargs)
        params = kwargs.get("sampling_params", args[1] if len(args) > 1 else None)
        if structured is not None:
            _constrain(params, structured)
        if capture is not None:
            capture.request(params)
        outputs = original(*args, **kwargs)
        if capture is not None:
            capture.add(outputs)
        for out in outputs:
            for completion in out.outputs:
                backend.stats["generated_tokens"] += len(completion.token_ids)
                reason = str(completion.finish_reason)
                reasons = backend.stats["finish_reasons"]
                reasons[reason] = reasons.get(reason, 0) + 1
            backend.stats["requests"] += 1
            timing = _request_timing(out)
            if timing is not None:
                backend.timings.append(timing)
        return outputs

    llm.generate = generate


def _with_seeds(seeds: SampleSeeds, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`LLM.generate`'s arguments with a per-request seed on each sampled request."""
    prompts = kwargs["prompts"] if "prompts" in kwargs else args[0]
    if "sampling_params" in kwargs:
        kwargs = {**kwargs, "sampling_params": seeds.seed(prompts, kwargs["sampling_params"])}
    elif len(args) > 1:
        args = (args[0], seeds.seed(prompts, args[1]), *args[2:])
    return args, kwargs


# vLLM's counters that show an optimization engaged (prefix-cache hits in tokens, drafted
# and accepted tokens, preemptions); read per task for the exercise evidence
EXERCISE_COUNTERS = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
                     "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                     "vllm:spec_decode_num_accepted_tokens", "vllm:num_preemptions",
                     "vllm:prompt_tokens", "vllm:generation_tokens")


def _wanted(name: str) -> bool:
    return name in EXERCISE_COUNTERS or name.startswith("vllm:spec_decode")


def _offline_counters(llm) -> dict:
    counters: dict[str, float] = {}
    for metric in llm.get_metrics():
        if _wanted(metric.name) and hasattr(metric, "value"):
            counters[metric.name] = counters.get(metric.name, 0.0) + float(metric.value)
    return counters


def server_counters(metrics_text: str) -> dict:
    """vLLM's counters from a Prometheus text page, named as offline (no `_total`)."""
    from prometheus_client.parser import text_string_to_metric_families

    counters: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total")
            if sample.name.endswith("_total") and _wanted(name):
                counters[name] = counters.get(name, 0.0) + float(sample.value)
    return counters


def _completions_lm(spec: ArmSpec, base_url: str, model_name: str):
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    max_length = int(spec.engine.get("max_model_len", 2048))
    return LocalCompletionsAPI(
        base_url=f"{base_url}/v1/completions", model=model_name, tokenizer=spec.model,
        tokenizer_backend="huggingface", num_concurrent=int(spec.serving.get("concurrency", 8)),
        max_retries=2, max_length=max_length, seed=spec.seed, timeout=900)


def import_backend(mode: str) -> None:
    """Imports what `open_backend` needs for `mode` (vLLM itself, offline: ~8 s on the
    2-core CPU machine) and lm-eval's evaluator, without building anything."""
    import importlib

    importlib.import_module(BACKEND_MODULES[mode])
    importlib.import_module("lm_eval.evaluator")


def open_backend(spec: ArmSpec, layout: ArmLayout, stack: ExitStack, progress_cls) -> Backend:
    started = time.time()
    if spec.mode == "offline":
        from lm_eval.models.vllm_causallms import VLLM

        lm = VLLM(pretrained=spec.model, seed=spec.seed, batch_size="auto",
                  **offline_call(spec))
        # stopped explicitly when the arm ends, however it ends: with the engine core in a
        # process of its own (vLLM's default, always on a GPU) nothing else stops it before
        # Python's exit handlers wait for that process forever
        stack.callback(shutdown_engine, lm.model)
        use_template_text(lm, spec.sampling)
        backend = Backend(lm=lm, effective_config=effective_engine_config(lm.model),
                          engine_start_seconds=time.time() - started,
                          description="vLLM offline (LLM), lm-eval `vllm` backend",
                          capture=Capture(spec.logprobs) if spec.logprobs else None,
                          seeds=SampleSeeds(spec.seed) if sampled_with_seeds(spec.sampling)
                          else None)
        _instrument(lm.model, backend, progress_cls, spec.structured_output)
        if backend.capture is not None:
            wrap_generate_until(lm, backend.capture)
        backend.read_counters = lambda: _offline_counters(lm.model)
        return backend
    if spec.mode == "hf":
        from lm_eval.models.huggingface import HFLM

        import torch

        kwargs = dict(spec.engine)
        kwargs.setdefault("device", "cuda" if torch.cuda.is_available() else "cpu")
        lm = HFLM(pretrained=spec.model, **kwargs)
        return Backend(lm=lm, effective_config=None, engine_start_seconds=time.time() - started,
                       description="Transformers, lm-eval `hf` backend")
    from evals.runner.server import SERVED_NAME, VllmServer
    from evals.runner.stream_proxy import StreamingProxy

    if spec.mode == "server":
        engine, adapter_name = server_call(spec)
        name = adapter_name or SERVED_NAME  # requests name the adapter, so vLLM applies it
        server = stack.enter_context(VllmServer(spec.model, engine, layout.root / "server.log",
                                                seed=spec.seed))
        upstream, headers = server.base_url, {}
        description = f"`vllm serve` on {server.base_url}, lm-eval `local-completions` backend"
        effective = None  # the parent's config audit resolved it, as `vllm serve` does
        read_counters = lambda: server_counters(server.metrics_text())  # noqa: E731
    else:
        upstream = str(spec.serving["base_url"]).rstrip("/").removesuffix("/v1")
        key_name = spec.serving.get("api_key_env")
        key = os.environ.get(key_name, "") if key_name else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        name = spec.serving.get("served_model_name") or spec.model
        effective, read_counters = None, None
        description = f"endpoint {upstream}, lm-eval `local-completions` backend"
    extra = ({"structured_outputs": spec.structured_output}
             if spec.structured_output is not None else None)
    proxy = stack.enter_context(StreamingProxy(upstream, headers, extra_body=extra))
    lm = _completions_lm(spec, proxy.base_url, name)
    return Backend(lm=lm, effective_config=effective,
                   engine_start_seconds=time.time() - started, description=description,
                   take_proxy_timings=proxy.take_timings, read_counters=read_counters,
                   server_died=server.died if spec.mode == "server" else None,
                   server_url=server.base_url if spec.mode == "server" else None,
                   served_name=name if spec.mode == "server" else None)
