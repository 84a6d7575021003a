"""Rebuild the embedded default from scratch: task data, tokenizer, tiny model, quantized variants.

Deterministic: the same seed writes the same data files byte for byte, and the
trained model's accuracy stays within a point across rebuilds (CPU float math is
not bit-stable across machines, so weights may differ in the last bits).

Usage (normally through `nox -s build_model`):
    python scripts/build_embedded.py [--seed 1234] [--steps N] [--skip-model] [--skip-quant]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "embedded"))

import task_data  # noqa: E402
import task_yaml  # noqa: E402

TASK_DIR = ROOT / "tasks" / "embedded"
MODEL_DIR = ROOT / "models" / "tiny-reviews"
DEFAULTS = {"steps": 2400, "batch_size": 32, "long_every": 5, "lr": 3e-3}
# early stop once held-out validation items (from the training split) reach these levels
STOP_AT = {"reviews": 0.86, "addition": 0.86}
VALIDATION_ITEMS = 150


def build_data(seed: int) -> dict[str, Path]:
    paths = task_data.build(TASK_DIR / "data", seed=seed)
    task_yaml.write(TASK_DIR, paths["shared_prefix"].read_text(encoding="utf-8"))
    return paths


def build_model(paths: dict[str, Path], seed: int, steps: int) -> dict:
    import tokenizer as tk
    import train

    def load(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    reviews_train, reviews_test = load(paths["reviews_train"]), load(paths["reviews_test"])
    add_train, add_test = load(paths["addition_train"]), load(paths["addition_test"])
    # the last items of each training split validate early stopping and are never trained on
    validation = {
        "reviews": [train.review_example(r) for r in reviews_train[-VALIDATION_ITEMS:]],
        "addition": [train.addition_example(r) for r in add_train[-VALIDATION_ITEMS:]],
    }
    reviews_train = reviews_train[:-VALIDATION_ITEMS]
    add_train = add_train[:-VALIDATION_ITEMS]
    prefix = paths["shared_prefix"].read_text(encoding="utf-8")
    texts = ([p + a for p, a in map(train.review_example, reviews_train)]
             + [p + a for p, a in map(train.addition_example, add_train)] + [prefix])
    tokenizer = tk.train_tokenizer(texts)
    corpus = train.Corpus(reviews_train, add_train, prefix)
    # greedy checks on held-out items during the build (the model card uses lm-eval + vLLM)
    eval_sets = {
        "reviews": [train.review_example(r) for r in reviews_test[:200]],
        "addition": [train.addition_example(r) for r in add_test[:200]],
        "shared_prefix": [(prefix + p, a) for p, a in map(train.review_example, reviews_test[:100])],
    }
    result = train.train(tokenizer, corpus, eval_sets, MODEL_DIR, seed=seed, steps=steps,
                         batch_size=DEFAULTS["batch_size"], long_every=DEFAULTS["long_every"],
                         lr=DEFAULTS["lr"], stop_at=STOP_AT, validation=validation)
    tk.save_hf(tokenizer, MODEL_DIR, model_max_length=result["config"]["max_position_embeddings"])
    return train.write_record(result, MODEL_DIR, seed=seed, max_steps=steps, stop_at=STOP_AT,
                              **{k: v for k, v in DEFAULTS.items() if k != "steps"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    parser.add_argument("--skip-model", action="store_true", help="only the task data")
    parser.add_argument("--skip-quant", action="store_true")
    args = parser.parse_args()
    started = time.time()
    paths = build_data(args.seed)
    print(f"task data and YAMLs written to {TASK_DIR}")
    if not args.skip_model:
        record = build_model(paths, args.seed, args.steps)
        print(f"model written to {MODEL_DIR} in {record['train_seconds']:.0f} s")
        if not args.skip_quant:
            import quantize

            quantize.quantize(MODEL_DIR, MODEL_DIR.parent)
    print(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
