"""A weakly noised copy of a model: every weight matrix gets Gaussian noise of `--scale`
times its own standard deviation (seeded), norms and biases unchanged. A change of the
kind a numerical optimization makes - the distributions move a little everywhere, the
answers rarely - for the distribution-shift benchmark (benchmarks/bench_logprob_shift.py).

    python scripts/noised_model.py [--source models/tiny-reviews] [--scale 0.01]
        [--seed 1234] [--out models/tiny-reviews-noised]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    import torch
    from safetensors.torch import load_file, save_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT / "models" / "tiny-reviews")
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--out", type=Path, default=ROOT / "models" / "tiny-reviews-noised")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for item in args.source.iterdir():
        if item.is_file() and item.suffix == ".json" and item.name not in (
                "measurements.json", "training.json"):
            shutil.copy(item, args.out / item.name)
    weights = load_file(str(args.source / "model.safetensors"))
    generator = torch.Generator().manual_seed(args.seed)
    noised = {}
    for name in sorted(weights):
        w = weights[name]
        if w.ndim == 2:  # weight matrices (embeddings and lm_head included)
            x = w.float()
            noise = torch.randn(x.shape, generator=generator) * x.std() * args.scale
            noised[name] = (x + noise).to(w.dtype)
        else:
            noised[name] = w
    save_file(noised, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    (args.out / "noise.json").write_text(json.dumps(
        {"source": str(args.source.relative_to(ROOT)) if args.source.is_relative_to(ROOT)
         else str(args.source), "scale": args.scale, "seed": args.seed,
         "what": "Gaussian noise of scale x each weight matrix's std; 1-D tensors unchanged"},
        indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out} (scale {args.scale}, seed {args.seed})")


if __name__ == "__main__":
    main()
