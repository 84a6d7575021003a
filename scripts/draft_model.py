"""A smaller draft of a model for draft-model speculative decoding: its first `--layers`
decoder layers with its own embeddings, final norm and LM head (layer truncation, an early
exit; no training), as a plain Qwen2 causal LM with the same tokenizer. Its KV cache is
1/3 of the 3-layer target's per token, and under a bounded KV budget (`kv_cache_memory_bytes`)
it takes the target's slots: configs/*/draft_model_load_curve.yaml (issue 55).

    python scripts/draft_model.py [--source models/tiny-reviews] [--layers 1]
        [--out models/tiny-reviews-draft]

Deterministic: the same source writes the same weights (tensors copied, none computed).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("generation_config.json", "special_tokens_map.json", "tokenizer.json",
          "tokenizer_config.json")


def draft_config(config: dict, layers: int) -> dict:
    """The target's config with `layers` decoder layers and no MTP layers."""
    if not 1 <= layers < int(config["num_hidden_layers"]):
        raise SystemExit(f"--layers must be from 1 to {config['num_hidden_layers'] - 1}")
    draft = {k: v for k, v in config.items() if k != "num_nextn_predict_layers"}
    draft.update(architectures=["Qwen2ForCausalLM"], num_hidden_layers=layers,
                 max_window_layers=min(int(config.get("max_window_layers", layers)), layers))
    return draft


def kept(name: str, layers: int) -> bool:
    """Embeddings, the final norm, the LM head and the first `layers` decoder layers."""
    if name.startswith("model.layers."):
        return int(name.split(".")[2]) < layers
    return not name.startswith("model.mtp_layers.")


def main() -> None:
    from safetensors.torch import load_file, save_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT / "models" / "tiny-reviews")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "models" / "tiny-reviews-draft")
    args = parser.parse_args()
    config = json.loads((args.source / "config.json").read_text(encoding="utf-8"))
    draft = draft_config(config, args.layers)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (args.source / name).exists():
            shutil.copy(args.source / name, args.out / name)
    (args.out / "config.json").write_text(json.dumps(draft, indent=2) + "\n", encoding="utf-8")
    weights = load_file(str(args.source / "model.safetensors"))
    save_file({k: v for k, v in sorted(weights.items()) if kept(k, args.layers)},
              str(args.out / "model.safetensors"), metadata={"format": "pt"})
    (args.out / "model.safetensors").chmod(0o644)  # as the other files, not safetensors' 0600
    source = args.source.relative_to(ROOT) if args.source.is_relative_to(ROOT) else args.source
    (args.out / "README.md").write_text(
        f"# {args.out.name}\n\nA draft for speculative decoding of `{source}`: its first "
        f"{args.layers} of {config['num_hidden_layers']} decoder layers with its embeddings, "
        "final norm and LM head (layer truncation, no training; the MTP layer dropped), as a "
        "plain Qwen2 model with the same tokenizer: `python scripts/draft_model.py`. Used by "
        "configs/cpu/draft_model_load_curve.yaml and configs/gpu/draft_model_load_curve.yaml, "
        "where its KV cache competes with the target's under one bounded KV budget.\n",
        encoding="utf-8")
    print(f"wrote {args.out} ({args.layers} of {config['num_hidden_layers']} layers)")


if __name__ == "__main__":
    main()
