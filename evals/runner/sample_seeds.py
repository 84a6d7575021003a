"""Per-request seeds for sampled generations (issue 53): repeat r of an item gets the same
seed in both arms, so an A/A under sampling is paired sample by sample, and the k repeats
of an item are k different samples.

The seed is derived from the run's seed, the request's prompt (its token ids: the item as
the engine sees it, template and system prompt included) and r, the how-manieth request
with that prompt in the task (lm-eval sends an item's k repeats as k copies of one
request, in a stable order, and puts the r-th copy's answer at position r of the item's
responses). vLLM seeds each request's own generator from `SamplingParams.seed`, so the
sample does not depend on the batch it ran in. Greedy and scoring requests are left alone.
"""

from __future__ import annotations

import hashlib

SEED_BITS = 62


def sample_seed(run_seed: int, prompt_token_ids, repeat: int) -> int:
    """The seed of repeat `repeat` of the request with these prompt token ids."""
    digest = hashlib.sha256(f"{int(run_seed)}:{int(repeat)}:".encode()
                            + ",".join(str(int(t)) for t in prompt_token_ids).encode())
    return int.from_bytes(digest.digest()[:8], "big") >> (64 - SEED_BITS)


def _prompt_ids(prompt) -> tuple[int, ...] | None:
    if isinstance(prompt, dict):
        ids = prompt.get("prompt_token_ids")
        return tuple(ids) if ids is not None else None
    if isinstance(prompt, (list, tuple)) and all(isinstance(t, int) for t in prompt):
        return tuple(prompt)
    return None


class SampleSeeds:
    """Seeds the sampled generation requests of one arm; `start_task` before each task."""

    def __init__(self, run_seed: int):
        self.run_seed = int(run_seed)
        self._seen: dict[tuple[int, ...], int] = {}
        self.seeded = 0
        """Requests seeded in the current task."""

    def start_task(self) -> None:
        self._seen.clear()
        self.seeded = 0

    def seed(self, prompts, sampling_params):
        """The call's SamplingParams with a per-request seed on each sampled generation
        request (copies: lm-eval may hand one object for many requests); others as given."""
        prompts = prompts if isinstance(prompts, list) else [prompts]
        params = (sampling_params if isinstance(sampling_params, list)
                  else [sampling_params] * len(prompts))
        out = []
        for prompt, sp in zip(prompts, params):
            ids = _prompt_ids(prompt)
            if (sp is None or ids is None or sp.prompt_logprobs is not None
                    or not float(sp.temperature or 0) > 0):
                out.append(sp)
                continue
            repeat = self._seen.get(ids, 0)
            self._seen[ids] = repeat + 1
            sp = sp.clone()
            sp.seed = sample_seed(self.run_seed, ids, repeat)
            self.seeded += 1
            out.append(sp)
        return out
