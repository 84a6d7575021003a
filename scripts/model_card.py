"""Measure the embedded model's variants with lm-eval through vLLM on CPU and write its README.

Each variant runs through the suite's own runner (one engine at a time, full
evaluation splits), so the figures are exactly what `nox -s ab` would see.

Usage (engine virtualenv, normally `nox -s model_card`):
    python scripts/model_card.py [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evals.plan.arm_spec import ArmSpec, package_versions  # noqa: E402
from evals.runner.launch import run_arm  # noqa: E402
from evals.pair.samples import read_output_dir  # noqa: E402

MODELS = ROOT / "models"
BASE = MODELS / "tiny-reviews"
TASKS = {"tiny_reviews_gen": "exact_match", "tiny_reviews_shared_prefix": "exact_match",
         "tiny_reviews_mc": "acc", "tiny_addition": "exact_match"}
COMMON = {"dtype": "bfloat16", "max_model_len": 1024}
VARIANTS = {
    "bf16": (BASE, {"enable_prefix_caching": False}),
    "bf16 + prefix caching": (BASE, {"enable_prefix_caching": True}),
    "bf16 + FP8 KV cache": (BASE, {"enable_prefix_caching": False, "kv_cache_dtype": "fp8"}),
    "bf16 + MTP + prefix caching": (BASE, {"enable_prefix_caching": True, "speculative_config": {
        "method": "mtp", "num_speculative_tokens": 1}}),
    "W4A16 (4-bit)": (MODELS / "tiny-reviews-w4a16", {"enable_prefix_caching": False}),
    "W8A8 (INT8)": (MODELS / "tiny-reviews-w8a8", {"enable_prefix_caching": False}),
}


def measure(limit: int | None, work: Path) -> dict:
    results = {}
    for name, (model, engine) in VARIANTS.items():
        if not model.exists():
            print(f"skipping {name}: {model} not built")
            continue
        slug = "".join(c if c.isalnum() else "-" for c in name.lower())
        spec = ArmSpec(arm=slug, model=str(model), engine={**COMMON, **engine},
                       env={"VLLM_CPU_KVCACHE_SPACE": "2"}, tasks=tuple(TASKS), limit=limit,
                       num_fewshot=0, seed=1234, include_paths=(str(ROOT / "tasks"),),
                       output_dir=str(work / slug)).with_fingerprint()
        layout = run_arm(spec)
        samples = read_output_dir(layout.lm_eval_dir, list(TASKS))
        accuracy = {}
        for task, metric in TASKS.items():
            values = [r.metrics[metric] for r in samples.records if r.task == task]
            accuracy[task] = {"accuracy": sum(values) / len(values), "n": len(values)}
        manifest = layout.read_manifest()
        spec_decode = manifest.get("spec_decode") or {}
        drafted = spec_decode.get("vllm:spec_decode_num_draft_tokens")
        accepted = spec_decode.get("vllm:spec_decode_num_accepted_tokens")
        results[name] = {
            "model": model.name, "engine": spec.engine, "accuracy": accuracy,
            "mtp_acceptance_rate": (accepted / drafted) if drafted else None,
            "mtp_counters": spec_decode or None,
        }
    return results


def weights_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.glob("*.safetensors")) / 1e6


def render(results: dict, training: dict, config: dict) -> str:
    header = "| variant | " + " | ".join(TASKS) + " | MTP draft acceptance |"
    lines = [header, "|" + "---|" * (len(TASKS) + 2)]
    for name, r in results.items():
        cells = [f"{r['accuracy'][t]['accuracy'] * 100:.1f}%" for t in TASKS]
        rate = r["mtp_acceptance_rate"]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'' if rate is None else f'{rate:.1%}'} |")
    n_items = {t: next(iter(results.values()))["accuracy"][t]["n"] for t in TASKS} if results else {}
    sizes = {p.name: weights_mb(p) for p in sorted(MODELS.iterdir()) if p.is_dir()}
    acc = training.get("greedy_accuracy_fp32", {})
    prefix_words = len((ROOT / "tasks/embedded/data/shared_prefix.txt").read_text().split())
    return f"""# tiny-reviews: the suite's embedded model

A tiny Qwen2-style decoder with one MTP (multi-token prediction) layer, trained from
scratch on the bundled tasks' training split, so that the suite's demo, tests and CI run
real vLLM engines on a CPU with no network. Rebuilt by `nox -s build_model`
(`scripts/build_embedded.py`); this page is written by `nox -s model_card`
(`scripts/model_card.py`), which measures every variant with lm-eval through vLLM.

## Architecture and size
- `architectures: ["MiMoForCausalLM"]`, `model_type: qwen2`: vLLM loads the decoder as
  Qwen2 and the MTP draft layer (`model.mtp_layers.0.*`: token_layernorm, hidden_layernorm,
  input_proj, final_layernorm and one decoder layer) for `speculative_config={{"method": "mtp"}}`.
- hidden size {config['hidden_size']}, {config['num_hidden_layers']} layers + 1 MTP layer,
  {config['num_attention_heads']} attention heads of dimension {config['head_dim']}
  ({config['num_key_value_heads']} KV head), MLP {config['intermediate_size']},
  vocabulary {config['vocab_size']} (byte-level BPE with Qwen2's pre-tokenizer, built with
  `tokenizers`), {training['parameters']:,} parameters, bf16 weights, untied lm_head.
- Weights on disk: {", ".join(f"{k} {v:.1f} MB" for k, v in sizes.items())}
  (total {sum(sizes.values()):.1f} MB).

## Training
- Seed {training['seed']}, {training['steps']} AdamW steps, stopped early once greedy accuracy
  on 150 held-out training-split items per task reached {training['stop_at']} (at most
  {training['max_steps']} steps; lr {training['lr']}, cosine, batch
  {training['batch_size']} packed sequences of 96 tokens; every {training['long_every']}th step a
  quarter batch of 448-token sequences that start with the shared-prefix instruction block),
  on CPU in {training['train_seconds'] / 60:.1f} minutes.
- Loss: next-token cross-entropy (answer tokens weighted 5x) plus 0.5 x the MTP layer's
  next-next-token cross-entropy, computed exactly as vLLM's MiMo MTP layer runs
  (hidden state before the final norm + embedding of the next token).
- Greedy accuracy in fp32 at the end of training (200 held-out items each, PyTorch):
  {", ".join(f"{k} {v:.1%}" for k, v in acc.items())}.

## Quantized variants
- `tiny-reviews-w4a16`: 4-bit integer weights, group size 128 (W4A16, compressed-tensors,
  written by llm-compressor's `QuantizationModifier`). AWQ's own `awq` format needs AutoAWQ,
  which quantizes only on CUDA, so the 4-bit variant is W4A16 compressed-tensors, which vLLM
  serves on CPU.
- `tiny-reviews-w8a8`: INT8 weights per channel with dynamic per-token INT8 activations
  (W8A8, compressed-tensors).
- Both are loaded as Qwen2ForCausalLM: they carry no MTP layer.

## Accuracy, lm-eval through vLLM on CPU
Evaluation split sizes: {", ".join(f"{t} {n}" for t, n in n_items.items())} items.
Zero-shot, greedy. The shared-prefix task prepends a {prefix_words}-word instruction
block with six labelled examples to every prompt.

{chr(10).join(lines)}

MTP draft acceptance = accepted draft tokens / proposed draft tokens, from vLLM's
`vllm:spec_decode_*` counters over all generation tasks of that arm.

Software: {", ".join(f"{k} {v}" for k, v in package_versions().items())}.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--work", default=str(ROOT / "reports" / "model-card"))
    args = parser.parse_args()
    results = measure(args.limit, Path(args.work))
    training = json.loads((BASE / "training.json").read_text())
    config = json.loads((BASE / "config.json").read_text())
    (BASE / "measurements.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    (BASE / "README.md").write_text(render(results, training, config), encoding="utf-8")
    print(f"wrote {BASE / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
