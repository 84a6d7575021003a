"""Seeded CPU training of the tiny model (main next-token loss + MTP next-next-token loss)."""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from tiny_model import TinyConfig, TinyMTPModel

ANSWER_WEIGHT = 5.0
MTP_LOSS_WEIGHT = 0.5


def review_example(row: dict) -> tuple[str, str]:
    return f"Review: {row['text']}\nSentiment:", f" {row['label']}"


def addition_example(row: dict) -> tuple[str, str]:
    return f"Add: {row['question']}", f" {row['answer']}"


@dataclass
class Corpus:
    reviews: list[dict]
    additions: list[dict]
    prefix: str


class SequenceSampler:
    """Packs prompt+answer examples into fixed-length token sequences with per-token loss weights.

    Answer tokens (the label or the sum, and the newline that ends them) get ANSWER_WEIGHT,
    other tokens weight 1; a share of sequences starts with the shared few-shot prefix so
    that the model handles the long shared-prefix prompts.
    """

    def __init__(self, tokenizer, corpus: Corpus, rng: random.Random):
        self.tok = tokenizer
        self.corpus = corpus
        self.rng = rng

    def _pack(self, start: str, length: int, review_share: float) -> tuple[list[int], list[float]]:
        text = start
        spans: list[tuple[int, int]] = []
        # roughly 6 characters per token is plenty of text for `length` tokens
        while len(text) < length * 7:
            if self.rng.random() < review_share:
                prompt, answer = review_example(self.rng.choice(self.corpus.reviews))
            else:
                prompt, answer = addition_example(self.rng.choice(self.corpus.additions))
            text += prompt
            spans.append((len(text), len(text) + len(answer) + 1))
            text += answer + "\n\n"
        enc = self.tok.encode(text)
        ids = enc.ids[:length]
        weights = [1.0] * len(ids)
        span_i = 0
        for i, (begin, _end) in enumerate(enc.offsets[:length]):
            while span_i < len(spans) and spans[span_i][1] <= begin:
                span_i += 1
            if span_i < len(spans) and spans[span_i][0] <= begin < spans[span_i][1]:
                weights[i] = ANSWER_WEIGHT
        return ids, weights

    def batch(self, size: int, long: bool) -> tuple[torch.Tensor, torch.Tensor]:
        seqs = []
        for _ in range(size):
            if long:
                seqs.append(self._pack(self.corpus.prefix, 448, review_share=0.9))
            else:
                seqs.append(self._pack("", 96, review_share=0.25))
        ids = torch.tensor([s[0] for s in seqs])
        weights = torch.tensor([s[1] for s in seqs])
        return ids, weights


def weighted_ce(logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    w = weights.reshape(-1)
    return (loss * w).sum() / w.sum()


@torch.no_grad()
def greedy_accuracy(model: TinyMTPModel, tok, items: list[tuple[str, str]], max_new: int = 6) -> float:
    """Exact match of greedy continuations (stopping at a newline), as lm-eval scores them."""
    model.eval()
    newline_ids = {i for t, i in tok.get_vocab().items() if "Ċ" in t}
    correct = 0
    for prompt, answer in items:
        ids = tok.encode(prompt).ids
        out: list[int] = []
        for _ in range(max_new):
            logits, _ = model(torch.tensor([ids + out]), with_mtp=False)
            nxt = int(logits[0, -1].argmax())
            if nxt in newline_ids or nxt == model.cfg.eos_token_id:
                break
            out.append(nxt)
        correct += tok.decode(out).strip() == answer.strip()
    model.train()
    return correct / len(items)


def train(tokenizer, corpus: Corpus, eval_sets: dict[str, list[tuple[str, str]]], out_dir: Path,
          *, seed: int, steps: int, batch_size: int, long_every: int, lr: float,
          stop_at: dict[str, float] | None = None,
          validation: dict[str, list[tuple[str, str]]] | None = None, log=print) -> dict:
    """Trains for `steps` steps, or stops early once every validation set's greedy accuracy
    reaches its `stop_at` level (checked every 100 steps). Early stopping keeps the model
    away from 100% on the easy task, so that optimizations can flip answers both ways."""
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    cfg = TinyConfig(vocab_size=tokenizer.get_vocab_size(),
                     eos_token_id=tokenizer.token_to_id("<|endoftext|>"))
    model = TinyMTPModel(cfg)
    sampler = SequenceSampler(tokenizer, corpus, random.Random(seed))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    warmup = max(1, steps // 20)

    def lr_at(step: int) -> float:
        if step < warmup:
            return lr * (step + 1) / warmup
        return lr * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    started = time.time()
    history = []
    for step in range(steps):
        long = long_every > 0 and step % long_every == long_every - 1
        ids, weights = sampler.batch(batch_size // 4 if long else batch_size, long)
        logits, mtp_logits = model(ids)
        main_loss = weighted_ce(logits[:, :-1], ids[:, 1:], weights[:, 1:])
        mtp_loss = weighted_ce(mtp_logits[:, :-1], ids[:, 2:], weights[:, 2:])
        loss = main_loss + MTP_LOSS_WEIGHT * mtp_loss
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            entry = {"step": step, "loss": round(main_loss.item(), 4),
                     "mtp_loss": round(mtp_loss.item(), 4),
                     "elapsed_s": round(time.time() - started, 1)}
            if stop_at and validation and step >= steps // 3:
                entry["validation"] = {name: greedy_accuracy(model, tokenizer, validation[name])
                                       for name in stop_at}
            history.append(entry)
            log(json.dumps(entry))
            if "validation" in entry and all(entry["validation"][k] >= v
                                             for k, v in stop_at.items()):
                log(json.dumps({"stopped_early_at_step": step}))
                break
    accuracy = {name: greedy_accuracy(model, tokenizer, items) for name, items in eval_sets.items()}
    log(json.dumps({"greedy_accuracy_fp32": accuracy}))
    save(model, out_dir)
    return {"config": cfg.hf_config(), "history": history, "train_seconds": time.time() - started,
            "steps_run": step + 1,
            "greedy_accuracy_fp32": accuracy,
            "parameters": sum(p.numel() for p in model.parameters())}


def save(model: TinyMTPModel, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.to(torch.bfloat16) for k, v in model.hf_state_dict().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(
        json.dumps(model.cfg.hf_config(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    gen = {"eos_token_id": model.cfg.eos_token_id, "bos_token_id": model.cfg.eos_token_id}
    (out_dir / "generation_config.json").write_text(
        json.dumps(gen, indent=2, sort_keys=True) + "\n", encoding="utf-8")
