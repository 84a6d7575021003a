"""Build models/tiny-hybrid: a tiny Qwen3-Next-style hybrid (GDN + attention, MoE) with an MTP layer.

Trained from scratch, seeded, on the bundled tasks' training split with the embedded
model's tokenizer and training loop (scripts/embedded/train.py: next-token loss with the
answers weighted, plus the MTP layer's next-next-token loss). The long training sequences
start with the shared-prefix instruction block and pack several labelled reviews after it,
which is also what the multi-turn task (tasks/hybrid) sends. Runs on a CPU (transformers'
PyTorch reference kernels for the GDN layers) on a GPU when one is present, else on the
CPU (about 30 minutes on 2 cores).

Usage:
    python scripts/build_hybrid.py [--seed 1234] [--steps N] [--device auto|cuda|cpu]
                                   [--time-budget SECONDS]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "embedded"))
sys.path.insert(0, str(ROOT / "tasks" / "hybrid"))

DATA = ROOT / "tasks" / "embedded" / "data"
TOKENIZER_FROM = ROOT / "models" / "tiny-reviews"
MODEL_DIR = ROOT / "models" / "tiny-hybrid"
DEFAULTS = {"steps": 2400, "batch_size": 32, "long_every": 4, "lr": 3e-3, "long_length": 576}
STOP_AT = {"reviews": 0.86, "addition": 0.86}
VALIDATION_ITEMS = 150
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    import platform

    return f"CPU {platform.processor() or platform.machine()}, torch {torch.__version__}"


def save_hybrid(model, out_dir: Path) -> None:
    import torch
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.to(torch.bfloat16) for k, v in model.checkpoint_state_dict().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(
        json.dumps(model.hf_config(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    eos = model.cfg.eos_token_id
    (out_dir / "generation_config.json").write_text(
        json.dumps({"eos_token_id": eos, "bos_token_id": eos}, indent=2, sort_keys=True) + "\n",
        encoding="utf-8")


def training_data(seed: int, scratch: Path) -> dict[str, Path]:
    """The bundled tasks' data, training splits included (those are not committed):
    regenerated with the embedded build's seed, and checked against the committed
    evaluation files, so the hybrid trains on exactly the embedded model's data."""
    import task_data

    paths = task_data.build(scratch, seed=seed)
    for name in ("reviews_test.jsonl", "addition_test.jsonl", "shared_prefix.txt"):
        if (scratch / name).read_bytes() != (DATA / name).read_bytes():
            raise SystemExit(f"seed {seed} does not rebuild tasks/embedded/data/{name}: "
                             "use the seed of scripts/build_embedded.py")
    return paths


def build(seed: int, steps: int, device: str, time_budget_s: float | None) -> dict:
    import tempfile

    import data_loader
    import train
    from hybrid_model import TinyHybridMTP, hybrid_config
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_FROM / "tokenizer.json"))
    with tempfile.TemporaryDirectory() as scratch:
        paths = training_data(seed, Path(scratch))
        reviews_train, reviews_test = _load(paths["reviews_train"]), _load(paths["reviews_test"])
        add_train, add_test = _load(paths["addition_train"]), _load(paths["addition_test"])
        prefix = paths["shared_prefix"].read_text(encoding="utf-8")
    validation = {
        "reviews": [train.review_example(r) for r in reviews_train[-VALIDATION_ITEMS:]],
        "addition": [train.addition_example(r) for r in add_train[-VALIDATION_ITEMS:]],
    }
    corpus = train.Corpus(reviews_train[:-VALIDATION_ITEMS], add_train[:-VALIDATION_ITEMS], prefix)
    turns = data_loader.multiturn()["test"]
    eval_sets = {
        "reviews": [train.review_example(r) for r in reviews_test[:200]],
        "addition": [train.addition_example(r) for r in add_test[:200]],
        "shared_prefix": [(prefix + p, a) for p, a in map(train.review_example, reviews_test[:100])],
        "multiturn": [(r["history"] + f"Review: {r['text']}\nSentiment:", f" {r['label']}")
                      for r in turns.select(range(0, 800, 9))],
    }

    def build_model(tok):
        return TinyHybridMTP(hybrid_config(tok.get_vocab_size(), tok.token_to_id("<|endoftext|>")))

    result = train.train(tokenizer, corpus, eval_sets, MODEL_DIR, seed=seed, steps=steps,
                         batch_size=DEFAULTS["batch_size"], long_every=DEFAULTS["long_every"],
                         lr=DEFAULTS["lr"], stop_at=STOP_AT, validation=validation,
                         build_model=build_model, save_model=save_hybrid,
                         long_length=DEFAULTS["long_length"], device=device,
                         time_budget_s=time_budget_s)
    for name in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_FROM / name, MODEL_DIR / name)
    return train.write_record(result, MODEL_DIR, seed=seed, max_steps=steps, stop_at=STOP_AT,
                              tokenizer="models/tiny-reviews (the same token ids)",
                              device=device_name(device), time_budget_s=time_budget_s,
                              **{k: v for k, v in DEFAULTS.items() if k != "steps"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    parser.add_argument("--device", default="auto", help="cuda, cpu or auto (cuda if present)")
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                        help="stop training (and save) after this many seconds")
    args = parser.parse_args()
    import torch

    device = args.device if args.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    started = time.time()
    record = build(args.seed, args.steps, device, args.time_budget)
    print(f"model written to {MODEL_DIR} in {record['train_seconds']:.0f} s "
          f"(total {time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
