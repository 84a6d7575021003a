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
import re
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
# A curriculum: manuals of a few needles first, so that copying a code out of the context
# forms before the manuals grow to the tasks' one to two blocks (session 27: trained on the
# tasks' sizes from the first step, 1,900 steps left validation recall at 0.0). Manual
# sizes in tokens per stage; the last stage is the tasks' own (1.0 to 1.9 blocks).
STAGES = ((40, 90), (90, 180), (180, 320), None)
STAGE_ITEMS = 2000  # training items per stage, drawn from with replacement
RAMP = 0.5  # the last stage starts at half the step budget
REPLAY = 0.25  # share of a batch drawn from the earlier stages
QUESTIONS = 4  # vaults asked after one manual (cold-race shape): more answers per sequence
ANSWER_WEIGHT = 5.0
DEFAULTS = {"steps": 3000, "batch_size": 16, "lr": 2e-3}
# validation recall (graded as the tasks grade it) at which training stops: a vault asked
# after the manual, and asked with the closing notice (the multi-turn wave 1; session 28's
# model, stopped on the first alone, answered the manual's last code there)
STOP_AT = {"recall": 0.95, "notice": 0.9}


def _manual_spans(manual: str) -> list[tuple[str, float]]:
    """The manual with its codes at weight 0: random digits nothing can predict."""
    return [(piece, 0.0 if re.fullmatch(recall.CODE_PATTERN, piece) else 1.0)
            for piece in re.split(recall.CODE_PATTERN, manual) if piece]


def _manual_tokens(stage: int, rng: random.Random) -> int:
    sizes = STAGES[stage]
    if sizes is None:
        return int(rng.choice(BLOCKS) * rng.uniform(1.0, 1.9)) - 20
    return rng.randint(*sizes)


def training_item(count, rng: random.Random, stage: int = len(STAGES) - 1
                  ) -> list[tuple[str, float]]:
    """One item as (text, loss weight) spans: the cold-race shape (a manual, then up to
    QUESTIONS vaults asked one after another) or the multi-turn shape (a code and the
    closing notice, then another vault), with a manual of the stage's size."""
    manual, codes = recall.build_manual(count, _manual_tokens(stage, rng), rng)
    spans = _manual_spans(manual)
    if rng.random() < 0.6:
        for vault in rng.sample(range(len(codes)), min(len(codes), QUESTIONS)):
            spans += [(recall.question(vault, rng.randrange(len(recall.PHRASINGS))), 1.0),
                      (f" {codes[vault]}\n", ANSWER_WEIGHT)]
        return spans
    vault, other = rng.randrange(len(codes)), rng.randrange(len(codes))
    notice = recall.closing_notice(count, rng.randint(8, 64))
    return spans + [(recall.notice_question(vault), 1.0), (f" {codes[vault]}", ANSWER_WEIGHT),
                    (f". {notice}\n\n", 1.0), (recall.question(other), 1.0),
                    (f" {codes[other]}\n", ANSWER_WEIGHT)]


def validation_item(count, rng: random.Random, notice: bool = False) -> tuple[str, str]:
    """A manual of the tasks' sizes and one question, or the question with the closing
    notice (`notice`): (prompt, " code")."""
    manual, codes = recall.build_manual(count, _manual_tokens(len(STAGES) - 1, rng), rng)
    vault = rng.randrange(len(codes))
    ask = (recall.notice_question(vault) if notice
           else recall.question(vault, rng.randrange(len(recall.PHRASINGS))))
    return manual + ask, f" {codes[vault]}"


class RecallSampler:
    """Batches of training items, padded with EOS at weight 0 (train.train's sampler), from
    the curriculum stage the training has reached plus a REPLAY share from the earlier ones.
    The stages pass evenly over `ramp_steps` steps, or over `ramp_seconds` from the first
    batch when given (a time budget: the step time is not known beforehand)."""

    def __init__(self, tokenizer, stages: list[list[list[tuple[str, float]]]],
                 rng: random.Random, eos: int, ramp_steps: int,
                 ramp_seconds: float | None = None):
        self.rng, self.eos, self.ramp_steps, self.calls = rng, eos, max(1, ramp_steps), 0
        self.ramp_seconds, self.started = ramp_seconds, None
        self.stages = [[self._encode(tokenizer, spans) for spans in items] for items in stages]

    @staticmethod
    def _encode(tokenizer, spans):
        ids, weights = [], []
        for text, weight in spans:
            piece = tokenizer.encode(text).ids
            ids += piece
            weights += [weight] * len(piece)
        return ids, weights

    def stage(self) -> int:
        last = len(self.stages) - 1
        if self.ramp_seconds:
            self.started = self.started or time.time()
            return min(last, int((time.time() - self.started) * last / self.ramp_seconds))
        return min(last, self.calls * last // self.ramp_steps)

    def batch(self, size: int, long: bool):
        import torch

        stage = self.stage()
        self.calls += 1
        chosen = [self.rng.choice(self.stages[
            self.rng.randrange(stage) if stage and self.rng.random() < REPLAY else stage])
            for _ in range(size)]
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


def first_code(text: str) -> str | None:
    """The first code-shaped number of a continuation: what the tasks' `code` filter grades."""
    found = re.search(recall.CODE_PATTERN, text)
    return found.group(0) if found else None


def code_recall(model, tokenizer, items: list[tuple[str, str]]) -> float:
    """Greedy recall graded as the tasks grade it (the first code-shaped number of the
    continuation; the multi-turn wave 1 answers the code, then the notice): the code's
    digits and two tokens more, no token ending the continuation early."""
    import train

    return train.greedy_accuracy(
        model, tokenizer, items, max_new=recall.CODE_DIGITS + 2, stop_tokens=frozenset(),
        grade=lambda continuation, answer: first_code(continuation) == answer.strip())


def where_recall_lives(model, tokenizer, limit: int | None = None) -> dict:
    """Greedy recall per shipped task and wave (graded as the tasks grade it): whole,
    attention knocked out, GDN knocked out."""
    sets = {f"{shape}_b{b} wave {w}": task_items(f"{shape}_b{b}", w, limit)
            for b in (128, 192, 256) for shape in ("cold_race", "multiturn") for w in (1, 2)}
    out = {}
    for name, items in sets.items():
        row = {"whole": code_recall(model, tokenizer, items)}
        for label, kind in (("no attention", "full_attention"), ("no GDN", "linear_attention")):
            with knocked_out(model, kind):
                row[label] = code_recall(model, tokenizer, items)
        out[name] = row
    return out


def load_built(model_dir: Path, device: str):
    """A built model back as a TinyHybridMTP (fp32): the inverse of
    TinyHybridMTP.checkpoint_state_dict (experts one by one fused again)."""
    import torch
    from hybrid_model import TinyHybridMTP, hybrid_config
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    model = TinyHybridMTP(hybrid_config(tokenizer.get_vocab_size(),
                                        tokenizer.token_to_id("<|endoftext|>")))
    saved = load_file(str(model_dir / "model.safetensors"))
    state = {}
    for name, target in list(model.lm.state_dict().items()) + [
            ("mtp." + k, v) for k, v in model.mtp.state_dict().items()]:
        base = name[:-len("gate_up_proj")] if name.endswith("mlp.experts.gate_up_proj") else None
        if base is not None:
            state[name] = torch.stack([torch.cat([saved[f"{base}{e}.gate_proj.weight"],
                                                  saved[f"{base}{e}.up_proj.weight"]])
                                       for e in range(target.shape[0])])
        elif name.endswith("mlp.experts.down_proj"):
            base = name[:-len("down_proj")]
            state[name] = torch.stack([saved[f"{base}{e}.down_proj.weight"]
                                       for e in range(target.shape[0])])
        else:
            state[name] = saved[name]
    lm = {k: v for k, v in state.items() if not k.startswith("mtp.")}
    model.lm.load_state_dict(lm)
    model.mtp.load_state_dict({k[4:]: v for k, v in state.items() if k.startswith("mtp.")})
    return model.float().to(device), tokenizer


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
          out_dir: Path, eval_items: int | None = None, lr: float = DEFAULTS["lr"]) -> dict:
    import build_hybrid
    import train
    from hybrid_model import TinyHybridMTP, hybrid_config
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_FROM / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|endoftext|>")
    count = recall.Counter(TOKENIZER_FROM / "tokenizer.json")
    rng = random.Random(f"recall-train-{seed}")
    stages = [[training_item(count, rng, stage) for _ in range(STAGE_ITEMS)]
              for stage in range(len(STAGES))]
    held_out = random.Random(f"recall-validation-{seed}")
    validation = {name: [validation_item(count, held_out, name == "notice")
                         for _ in range(eval_items or 100)] for name in STOP_AT}
    sampler = RecallSampler(tokenizer, stages, random.Random(seed), eos, int(steps * RAMP),
                            time_budget_s * RAMP if time_budget_s else None)
    eval_sets = {"cold_race_b128": task_items("cold_race_b128", limit=eval_items),
                 "multiturn_b128": task_items("multiturn_b128", 2, eval_items)}
    kept = {}

    def save(model, path: Path) -> None:
        build_hybrid.save_hybrid(model, path)
        kept["model"] = model

    result = train.train(
        tokenizer, None, eval_sets, out_dir, seed=seed, steps=steps, batch_size=batch_size,
        long_every=0, lr=lr, stop_at=STOP_AT, validation=validation,
        validate=lambda model: {name: code_recall(model, tokenizer, items)
                                for name, items in validation.items()},
        build_model=lambda tok: TinyHybridMTP(hybrid_config(tok.get_vocab_size(), eos)),
        save_model=save, device=device, time_budget_s=time_budget_s, sampler=sampler)
    for name in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_FROM / name, out_dir / name)
    result["recall"] = where_recall_lives(kept["model"].to(device).float(), tokenizer,
                                          eval_items)
    record = train.write_record(result, out_dir, seed=seed, max_steps=steps, stop_at=STOP_AT,
                                device=build_hybrid.device_name(device), batch_size=batch_size,
                                lr=lr, training_items=STAGE_ITEMS * len(STAGES),
                                blocks=list(BLOCKS), stages=[list(x) if x else "tasks" for x in STAGES],
                                questions=QUESTIONS, ramp=RAMP, replay=REPLAY,
                                time_budget_s=time_budget_s)
    write_readme(out_dir, record)
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    parser.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"])
    parser.add_argument("--lr", type=float, default=DEFAULTS["lr"])
    parser.add_argument("--device", default="auto", help="cuda, cpu or auto (cuda if present)")
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--measure", type=Path, default=None, metavar="MODEL_DIR",
                        help="only measure a built model's recall again (graded as the tasks "
                             "grade it) into its training.json and README")
    parser.add_argument("--eval-items", type=int, default=None,
                        help="items per recall measurement (default: all; a smoke test: 2)")
    args = parser.parse_args()
    import torch

    device = args.device if args.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    started = time.time()
    if args.measure:
        model, tokenizer = load_built(args.measure, device)
        record = json.loads((args.measure / "training.json").read_text(encoding="utf-8"))
        record["recall"] = where_recall_lives(model, tokenizer, args.eval_items)
        record["recall_graded"] = "first code-shaped number, as the tasks' filter"
        (args.measure / "training.json").write_text(
            json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        write_readme(args.measure, record)
        print(f"measured in {time.time() - started:.0f} s: {json.dumps(record['recall'])}")
        return 0
    record = build(args.seed, args.steps, args.batch_size, device, args.time_budget, args.out,
                   args.eval_items, args.lr)
    print(f"model written to {args.out} in {record['train_seconds']:.0f} s "
          f"(total {time.time() - started:.0f} s); recall: {json.dumps(record['recall'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
