"""Build models/tiny-hybrid-recall: the tiny hybrid (scripts/embedded/hybrid_model.py, the
architecture of models/tiny-hybrid) trained to recall vault codes from a manual, for the
needle-recall tasks of issue 54 (tasks/recall, docs/recall.md).

Training items have the shapes of the recall tasks (scripts/build_recall_tasks.py) with
other codes (a training seed, never the tasks' seed): a manual sized for a block of 128 to
256 tokens and a question about one vault, answered with its code; and the multi-turn
shape, the code and the closing notice, then a question about another vault. Code tokens
weigh 5x in the loss, as the answers of the other builds do, plus the MTP layer's
next-next-token loss. After training, greedy recall is measured on the shipped recall
tasks (fp32, PyTorch), whole and with each layer type knocked out (the attention layer's
or the GDN layers' output zeroed), to say where recall lives; all of it goes into
training.json and the model's README.

Meant for the GPU machine (benchmarks/gpu_h200/recall.sh runs it); on a CPU it runs, slowly
(transformers' reference GDN kernels), e.g. `--steps 2 --batch-size 2 --eval-items 2` as
a smoke test.

Usage: python scripts/build_recall_hybrid.py [--seed 7] [--steps 3000] [--device auto]
                                             [--time-budget SECONDS] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "embedded"))
sys.path.insert(0, str(ROOT / "scripts"))

import build_recall_tasks as recall  # noqa: E402

TOKENIZER_FROM = ROOT / "models" / "tiny-reviews"
OUT = ROOT / "models" / "tiny-hybrid-recall"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
BLOCKS = (128, 160, 192, 224, 256)
POOL = 6000  # training items, drawn from with replacement
ANSWER_WEIGHT = 5.0
DEFAULTS = {"steps": 3000, "batch_size": 16, "lr": 2e-3}
STOP_AT = {"recall": 0.95}


def _code(rng: random.Random) -> str:
    return f"{rng.randrange(10 ** recall.CODE_DIGITS):0{recall.CODE_DIGITS}d}"


def training_item(count, rng: random.Random) -> list[tuple[str, float]]:
    """One item as (text, loss weight) spans: a cold-race or a multi-turn shape."""
    block = rng.choice(BLOCKS)
    manual, codes = recall.build_manual(count, int(block * rng.uniform(1.0, 1.9)) - 20, rng)
    vault = rng.randrange(len(codes))
    if rng.random() < 0.5:
        ask = recall.question(vault, rng.randrange(len(recall.PHRASINGS)))
        return [(manual + ask, 1.0), (f" {codes[vault]}", ANSWER_WEIGHT), ("\n", 1.0)]
    notice = recall.closing_notice(count, max(32, block // 2))
    other = rng.randrange(len(codes))
    return [(manual + recall.notice_question(vault), 1.0), (f" {codes[vault]}", ANSWER_WEIGHT),
            (f". {notice}\n\n", 1.0), (recall.question(other), 1.0),
            (f" {codes[other]}", ANSWER_WEIGHT), ("\n", 1.0)]


class RecallSampler:
    """Batches of training items, padded with EOS at weight 0 (train.train's sampler)."""

    def __init__(self, tokenizer, items: list[list[tuple[str, float]]], rng: random.Random,
                 eos: int):
        self.rng, self.eos = rng, eos
        self.encoded = []
        for spans in items:
            ids, weights = [], []
            for text, weight in spans:
                piece = tokenizer.encode(text).ids
                ids += piece
                weights += [weight] * len(piece)
            self.encoded.append((ids, weights))

    def batch(self, size: int, long: bool):
        import torch

        chosen = [self.rng.choice(self.encoded) for _ in range(size)]
        width = max(len(ids) for ids, _ in chosen)
        ids = [i + [self.eos] * (width - len(i)) for i, _ in chosen]
        weights = [w + [0.0] * (width - len(w)) for _, w in chosen]
        return torch.tensor(ids), torch.tensor(weights)


def task_items(task: str, wave: int | None = None, limit: int | None = None
               ) -> list[tuple[str, str]]:
    """(prompt, " code") of a shipped recall task's items (one wave or all, the first
    `limit`)."""
    rows = [json.loads(line) for line in (recall.TASK_DIR / "data" / f"{task}.jsonl")
            .read_text(encoding="utf-8").splitlines()]
    items = [(r["prompt"], f" {r['code']}") for r in rows if wave is None or r["wave"] == wave]
    return items[:limit]


def knocked_out(model, layer_type: str):
    """A context that zeroes the output of every layer of `layer_type` (linear_attention or
    full_attention) in the main model."""
    from contextlib import ExitStack

    stack = ExitStack()
    for layer, kind in zip(model.lm.model.layers, model.config.layer_types):
        if kind != layer_type:
            continue
        module = layer.linear_attn if kind == "linear_attention" else layer.self_attn

        def zero(_module, _inputs, output):
            if isinstance(output, tuple):
                return (output[0] * 0,) + tuple(output[1:])
            return output * 0

        stack.callback(module.register_forward_hook(zero).remove)
    return stack


def where_recall_lives(model, tokenizer, train, limit: int | None = None) -> dict:
    """Greedy recall per shipped task and wave: whole, attention knocked out, GDN knocked out."""
    sets = {f"{shape}_b{b} wave {w}": task_items(f"{shape}_b{b}", w, limit)
            for b in (128, 192, 256) for shape in ("cold_race", "multiturn") for w in (1, 2)}
    out = {}
    for name, items in sets.items():
        row = {"whole": train.greedy_accuracy(model, tokenizer, items)}
        for label, kind in (("no attention", "full_attention"), ("no GDN", "linear_attention")):
            with knocked_out(model, kind):
                row[label] = train.greedy_accuracy(model, tokenizer, items)
        out[name] = row
    return out


def write_readme(out_dir: Path, record: dict) -> None:
    lines = ["# tiny-hybrid-recall: the tiny hybrid trained to recall vault codes", "",
             "The architecture of models/tiny-hybrid (3 Gated DeltaNet layers, 1 gated "
             "attention layer, a 4-expert MoE, one MTP layer), trained by "
             "`scripts/build_recall_hybrid.py` on manuals with other codes than the shipped "
             "recall tasks' (tasks/recall). For the issue-54 configs "
             "(configs/gpu/recall_b*.yaml, docs/recall.md).", "",
             f"Seed {record['seed']}, {record['steps']} steps of at most "
             f"{record['max_steps']}, {record['train_seconds']:.0f} s on {record['device']}.", "",
             "## Greedy recall (fp32, PyTorch) and where it lives", "",
             "A layer type knocked out: its layers' outputs zeroed in the main model.", "",
             "| items | whole | no attention | no GDN |", "|---|---|---|---|"]
    for name, row in record["recall"].items():
        lines.append(f"| {name} | {row['whole']:.1%} | {row['no attention']:.1%} | "
                     f"{row['no GDN']:.1%} |")
    lines += ["", "Recall per config through vLLM: the runs of benchmarks/gpu_h200/recall.sh "
              "(benchmarks/results/)."]
    (out_dir / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def build(seed: int, steps: int, batch_size: int, device: str, time_budget_s: float | None,
          out_dir: Path, eval_items: int | None = None) -> dict:
    import build_hybrid
    import train
    from hybrid_model import TinyHybridMTP, hybrid_config
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_FROM / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|endoftext|>")
    count = recall.Counter(TOKENIZER_FROM / "tokenizer.json")
    rng = random.Random(f"recall-train-{seed}")
    items = [training_item(count, rng) for _ in range(POOL)]
    held_out = random.Random(f"recall-validation-{seed}")
    validation = {"recall": []}
    for _ in range(eval_items or 100):
        spans = training_item(count, held_out)
        validation["recall"].append((spans[0][0], spans[1][0]))
    sampler = RecallSampler(tokenizer, items, random.Random(seed), eos)
    eval_sets = {"cold_race_b128": task_items("cold_race_b128", limit=eval_items),
                 "multiturn_b128": task_items("multiturn_b128", 2, eval_items)}
    kept = {}

    def save(model, path: Path) -> None:
        build_hybrid.save_hybrid(model, path)
        kept["model"] = model

    result = train.train(
        tokenizer, None, eval_sets, out_dir, seed=seed, steps=steps, batch_size=batch_size,
        long_every=0, lr=DEFAULTS["lr"], stop_at=STOP_AT, validation=validation,
        build_model=lambda tok: TinyHybridMTP(hybrid_config(tok.get_vocab_size(), eos)),
        save_model=save, device=device, time_budget_s=time_budget_s, sampler=sampler)
    for name in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_FROM / name, out_dir / name)
    result["recall"] = where_recall_lives(kept["model"].to(device).float(), tokenizer, train,
                                          eval_items)
    record = train.write_record(result, out_dir, seed=seed, max_steps=steps, stop_at=STOP_AT,
                                device=build_hybrid.device_name(device), batch_size=batch_size,
                                lr=DEFAULTS["lr"], training_items=POOL, blocks=list(BLOCKS),
                                time_budget_s=time_budget_s)
    write_readme(out_dir, record)
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    parser.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"])
    parser.add_argument("--device", default="auto", help="cuda, cpu or auto (cuda if present)")
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--eval-items", type=int, default=None,
                        help="items per recall measurement (default: all; a smoke test: 2)")
    args = parser.parse_args()
    import torch

    device = args.device if args.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    started = time.time()
    record = build(args.seed, args.steps, args.batch_size, device, args.time_budget, args.out,
                   args.eval_items)
    print(f"model written to {args.out} in {record['train_seconds']:.0f} s "
          f"(total {time.time() - started:.0f} s); recall: {json.dumps(record['recall'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
