"""Per-token log-probabilities of an offline arm's generations, kept beside its samples.

With the config's `logprobs: k`, every generation request of the arm asks vLLM for the
top-k log-probabilities of each generated token (`SamplingParams.logprobs`; the chosen
token's own log-probability always comes with them). The instrumented `LLM.generate`
(evals.runner.backends) hands every output to `Capture.add`, keyed by its prompt's token
ids; lm-eval's `generate_until` is wrapped so that, once it returns, each request
(an lm-eval `Instance`: task, doc_id, context) is matched to its output by encoding its
context as lm-eval did (lm-eval cuts a too-long context from the left: a captured prompt
that is a suffix of the encoding matches too). The worker writes a task's rows to
`<arm>/logprobs/<task>.jsonl` (evals.runner.layout), read by evals.pair.logprobs.

Scoring (log-likelihood) requests are left alone: lm-eval already logs each choice's
log-likelihood in its samples.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evals.schemas import LOGPROBS_HEADER

DECIMALS = 6


def generation_params(sampling_params) -> list:
    """The generation requests' SamplingParams of one `LLM.generate` call (one or a list);
    scoring (log-likelihood) requests, which ask for prompt log-probabilities, left out."""
    params = sampling_params if isinstance(sampling_params, list) else [sampling_params]
    return [sp for sp in params if sp is not None and sp.prompt_logprobs is None]


class Capture:
    """The top-k log-probabilities of one arm's generations, by task and doc_id."""

    def __init__(self, top_k: int):
        self.top_k = top_k
        self.enabled = True
        """False: asks for and keeps nothing (benchmarks/bench_logprob_cost.py)."""
        self._by_prompt: dict[tuple[int, ...], list[dict]] = {}
        self._lengths: set[int] = set()
        self._rows: dict[str, dict[int, dict]] = {}

    def request(self, sampling_params) -> None:
        """Asks for top-k log-probabilities on the generation requests."""
        if not self.enabled:
            return
        for sp in generation_params(sampling_params):
            sp.logprobs = self.top_k

    def add(self, outputs) -> None:
        if not self.enabled:
            return
        for out in outputs:
            if getattr(out, "prompt_logprobs", None) is not None or not out.outputs:
                continue
            completion = out.outputs[0]
            if completion.logprobs is None or out.prompt_token_ids is None:
                continue
            top = []
            for position in range(len(completion.token_ids)):
                entry = completion.logprobs[position]
                ranked = sorted(((int(t), float(lp.logprob)) for t, lp in entry.items()),
                                key=lambda x: -x[1])
                top.append([[t, round(lp, DECIMALS)] for t, lp in ranked])
            key = tuple(out.prompt_token_ids)
            self._by_prompt.setdefault(key, []).append(
                {"tokens": [int(t) for t in completion.token_ids], "top": top})
            self._lengths.add(len(key))

    def _find(self, encoded: list[int]) -> dict | None:
        exact = self._by_prompt.get(tuple(encoded))
        if exact:
            return exact[0]
        for length in sorted(self._lengths, reverse=True):  # cut from the left by lm-eval
            if length < len(encoded):
                cut = self._by_prompt.get(tuple(encoded[-length:]))
                if cut:
                    return cut[0]
        return None

    def assign(self, requests, encode) -> None:
        """Matches lm-eval's generation requests (Instances) to their captured outputs."""
        if not self.enabled:
            return
        for instance in requests:
            task = getattr(instance, "task_name", None)
            doc_id = getattr(instance, "doc_id", None)
            if task is None or doc_id is None:
                continue
            row = self._find(list(encode(instance.args[0])))
            if row is not None:
                self._rows.setdefault(task, {}).setdefault(int(doc_id), row)
        self._by_prompt.clear()
        self._lengths.clear()

    def take(self, task: str) -> dict[int, dict]:
        """The task's rows since the last take (doc_id -> row), removed from the capture."""
        return self._rows.pop(task, {})

    def clear(self) -> None:
        self._by_prompt.clear()
        self._lengths.clear()
        self._rows.clear()


def wrap_generate_until(lm, capture: Capture) -> None:
    """After lm-eval's `generate_until`, match its requests to the captured outputs."""
    original = lm.generate_until

    def generate_until(requests, *args, **kwargs):
        results = original(requests, *args, **kwargs)
        capture.assign(requests, lm.tok_encode)
        return results

    lm.generate_until = generate_until


def write_rows(path: Path, task: str, top_k: int, rows: dict[int, dict], *,
               append: bool) -> None:
    """Writes (or, for a chunk of a sequential run, appends) one task's rows. A reader
    keeps the last row of a doc_id, so a chunk run again after a crash replaces its rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"doc_id": d, **rows[d]}, separators=(",", ":")) for d in sorted(rows)]
    header = json.dumps(LOGPROBS_HEADER.stamp({"task": task, "top_k": top_k}))
    if append and path.exists():
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in [header, *lines]), encoding="utf-8")
    os.replace(tmp, path)
