"""The load sweep of a server arm: after its accuracy items, on the same `vllm serve`, per
concurrency level a warm-up and then N streamed requests at that concurrency.

Closed loop: a level keeps `concurrency` requests in flight until N have been sent. Each
request is streamed from the server's OpenAI completions endpoint (loopback only, with
`ignore_eos`, so both arms generate the same number of tokens) and recorded raw: its start,
the arrival of each streamed chunk that carries text, its end (seconds on this process's
monotonic clock, from the sweep's start), its prompt and output token counts (the server's
`usage`), or the server's error. While a level runs, the server's /metrics is read every
half second for its queue (running, waiting) and KV-cache usage; its counters (preemptions,
prefix-cache hits) are read before and after. A level whose requests fail is recorded as
failed with the server's error, and the sweep goes on. Nothing is computed here: the
parent's analysis (evals.analyse.load_curve) computes every figure from this record.

Bounded: a request has `request_timeout_s`, a level `level_timeout_s`; a level's unfinished
requests then fail with that reason.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from evals.schemas import LOAD_SWEEP
from evals.runner.layout import sweep_path

METRICS_INTERVAL_S = 0.5
GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
          "vllm:kv_cache_usage_perc": "kv_cache_usage", "vllm:gpu_cache_usage_perc":
          "kv_cache_usage"}
"""vLLM's gauges of the queue and the KV cache (`gpu_cache_usage_perc` before vLLM V1)."""
ERROR_CHARS = 500


def server_gauges(metrics_text: str) -> dict[str, float]:
    """The queue and KV-cache gauges of a Prometheus text page, summed over label sets."""
    from prometheus_client.parser import text_string_to_metric_families

    gauges: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            name = GAUGES.get(sample.name)
            if name is not None:
                gauges[name] = gauges.get(name, 0.0) + float(sample.value)
    return gauges


def task_prompts(samples_file: Path) -> list[str]:
    """The prompts of a task's lm-eval samples file, in item order (each item's first
    request's context)."""
    rows = []
    with Path(samples_file).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                sample = json.loads(line)
                args = sample.get("arguments") or {}
                first = args.get("gen_args_0") or next(iter(args.values()), {})
                rows.append((int(sample.get("doc_id", len(rows))), str(first.get("arg_0", ""))))
    return [prompt for _, prompt in sorted(rows, key=lambda r: r[0]) if prompt]


def synthetic_prompts(n: int, input_tokens: int, vocab: list[int], seed: int) -> list[list[int]]:
    """`n` prompts of `input_tokens` token ids drawn from `vocab` with a seeded generator."""
    rng = np.random.default_rng([seed, input_tokens])
    ids = np.asarray(vocab)
    return [ids[rng.integers(0, ids.size, input_tokens)].tolist() for _ in range(n)]


def prompt_vocabulary(model: str) -> list[int]:
    """The model tokenizer's ordinary token ids (special tokens left out)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    special = set(tokenizer.all_special_ids)
    return [i for i in range(tokenizer.vocab_size) if i not in special]


class Sweep:
    """One arm's sweep against `base_url` (a loopback `vllm serve`)."""

    def __init__(self, base_url: str, model_name: str, prompts: list, *, output_tokens: int,
                 requests_per_level: int, request_timeout_s: float, level_timeout_s: float,
                 server_died=None):
        from evals.runner.server import LOOPBACK  # here: a reader of finished sweeps
        # (the analysis) must not import the server's client (requests, psutil)

        host = urlparse(base_url).hostname
        if host != LOOPBACK:
            raise ValueError(f"the load sweep runs against a loopback server only, not {host}")
        if not prompts:
            raise ValueError("the load sweep has no prompts")
        self.base_url = base_url.rstrip("/")
        self.model_name = model_name
        self.prompts = prompts
        self.output_tokens = output_tokens
        self.n = requests_per_level
        self.request_timeout_s = request_timeout_s
        self.level_timeout_s = level_timeout_s
        self.server_died = server_died or (lambda: None)
        self._next_prompt = 0
        self._origin = time.perf_counter()

    def _now(self) -> float:
        return time.perf_counter() - self._origin

    def _prompt(self):
        prompt = self.prompts[self._next_prompt % len(self.prompts)]
        self._next_prompt += 1
        return prompt

    def _body(self, prompt) -> dict:
        return {"model": self.model_name, "prompt": prompt, "max_tokens": self.output_tokens,
                "min_tokens": self.output_tokens, "ignore_eos": True, "temperature": 0.0,
                "stream": True, "stream_options": {"include_usage": True}}

    async def _request(self, session, prompt) -> dict:
        import aiohttp

        start = self._now()
        record: dict = {"start": start, "first": None, "end": None, "chunks": [],
                        "prompt_tokens": None, "output_tokens": None, "error": None}
        try:
            async with session.post(f"{self.base_url}/v1/completions", json=self._body(prompt),
                                    timeout=aiohttp.ClientTimeout(
                                        total=self.request_timeout_s)) as response:
                if response.status != 200:
                    text = (await response.text())[:ERROR_CHARS]
                    record["error"] = f"HTTP {response.status}: {text}"
                    record["end"] = self._now()
                    return record
                async for line in response.content:
                    text = line.decode("utf-8").strip()
                    if not text.startswith("data:") or text[5:].strip() == "[DONE]":
                        continue
                    chunk = json.loads(text[5:].strip())
                    if chunk.get("error"):
                        record["error"] = str(chunk["error"])[:ERROR_CHARS]
                    usage = chunk.get("usage")
                    if usage:
                        record["prompt_tokens"] = usage.get("prompt_tokens")
                        record["output_tokens"] = usage.get("completion_tokens")
                    if any(c.get("text") for c in chunk.get("choices") or []):
                        at = self._now()
                        record["chunks"].append(at)
                        if record["first"] is None:
                            record["first"] = at
        except asyncio.TimeoutError:
            record["error"] = f"no response within request_timeout_s ({self.request_timeout_s:g} s)"
        except aiohttp.ClientError as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
        record["end"] = self._now()
        if record["error"] is None and (record["first"] is None or not record["output_tokens"]):
            record["error"] = "the server streamed no tokens"
        return record

    async def _metrics(self, session) -> str | None:
        try:
            async with session.get(f"{self.base_url}/metrics") as response:
                return await response.text()
        except Exception:  # metrics are evidence, not a condition of the sweep
            return None

    async def _sample_gauges(self, session, into: list) -> None:
        while True:
            text = await self._metrics(session)
            if text is not None:
                into.append({"t": self._now(), **server_gauges(text)})
            await asyncio.sleep(METRICS_INTERVAL_S)

    async def _closed_loop(self, session, concurrency: int, count: int) -> list[dict]:
        prompts = [self._prompt() for _ in range(count)]
        slots = asyncio.Semaphore(concurrency)
        results: list[dict | None] = [None] * count

        async def one(i: int) -> None:
            async with slots:
                results[i] = await self._request(session, prompts[i])

        tasks = [asyncio.ensure_future(one(i)) for i in range(count)]
        done, pending = await asyncio.wait(tasks, timeout=self.level_timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        reason = f"the level ran out of level_timeout_s ({self.level_timeout_s:g} s)"
        return [r if r is not None else {"start": None, "first": None, "end": None,
                                         "chunks": [], "prompt_tokens": None,
                                         "output_tokens": None, "error": reason}
                for r in results]

    async def _level(self, session, concurrency: int, counters) -> dict:
        died = self.server_died()
        if died:
            return {"concurrency": concurrency, "status": "failed", "error": died,
                    "requests": [], "warmup_errors": 0, "gauges": [], "counters": {}}
        warmup = await self._closed_loop(session, concurrency, concurrency)
        before = counters(await self._metrics(session))
        gauges: list = []
        sampler = asyncio.ensure_future(self._sample_gauges(session, gauges))
        started = self._now()
        try:
            requests = await self._closed_loop(session, concurrency, self.n)
        finally:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
        after = counters(await self._metrics(session))
        errors = [r["error"] for r in requests if r["error"]]
        died = self.server_died()
        return {"concurrency": concurrency, "status": "failed" if errors else "ok",
                "error": (died or errors[0]) if errors else None, "started": started,
                "ended": self._now(), "requests": requests,
                "warmup_errors": sum(1 for r in warmup if r["error"]), "gauges": gauges,
                "counters": {k: after[k] - before.get(k, 0.0) for k in sorted(after)}}

    async def _run(self, levels: list[int], counters, say) -> list[dict]:
        import aiohttp

        results = []
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            for concurrency in levels:
                level = await self._level(session, concurrency, counters)
                results.append(level)
                say(f"load sweep: concurrency {concurrency}: {level['status']}"
                    + (f" ({level['error']})" if level["error"] else ""))
        return results

    def run(self, levels: list[int], counters=lambda text: {}, say=print) -> list[dict]:
        """Every level in order; `counters(metrics_text or None)` reads the counters."""
        self._origin = time.perf_counter()
        return asyncio.run(self._run(levels, counters, say))


def write_sweep(arm_root: Path, record: dict) -> None:
    LOAD_SWEEP.write(sweep_path(arm_root), record)


def write_sweep_error(arm_root: Path, arm: str, error: str) -> None:
    """A sweep that could not run (its prompts, the tokenizer): no levels, the reason."""
    write_sweep(arm_root, {"arm": arm, "results": [], "error": error[:ERROR_CHARS]})
