"""Does speculative decoding (MTP) keep tokens the target model would not sample, under
sampling, with and without per-request seeds (issue 53)? The embedded model's addition
prompts, 96 requests at T = 0.6 / top_p = 0.95; an answer other than a number is junk.
Without MTP there is none; what MTP adds is the rejection sampler's doing.

EVALS_ENGINE_LOCK-style serialisation is the caller's (`flock LOCK python ...`);
VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 on the CPU machine.

python benchmarks/bench_sampled_spec_decode.py mtp|plain
"""

import json
import re
import sys
from pathlib import Path

from vllm import LLM, SamplingParams

MODEL = str(Path(__file__).resolve().parents[1] / "models" / "tiny-reviews")
llm = LLM(model=MODEL, dtype="bfloat16", max_model_len=1024,
          enable_chunked_prefill=False, seed=1234, enforce_eager=True,
          speculative_config=({"method": "mtp", "num_speculative_tokens": 1}
                              if sys.argv[1] == "mtp" else None))
PAIRS = [(77, 38), (56, 47), (12, 62), (90, 52), (21, 26), (40, 60)]
prompts = [f"Add: {a} + {b} =" for a, b in PAIRS] * 16
out = {}
for seeded in (False, True):
    params = [SamplingParams(temperature=0.6, top_p=0.95, max_tokens=8, stop=["\n"],
                             seed=(1000 + i) if seeded else None) for i in range(len(prompts))]
    res = llm.generate(prompts, params, use_tqdm=False)
    texts = [r.outputs[0].text for r in res]
    junk = [t for t in texts if not re.fullmatch(r" ?\d+ *", t)]
    out["seeded" if seeded else "unseeded"] = {"n": len(texts), "junk": len(junk),
                                               "examples": junk[:5]}
print("RESULT", sys.argv[1], json.dumps(out))
