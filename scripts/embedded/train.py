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

    def __init__(self, tokenizer, corpus: Corpus, rng: random.Random, long_length: int = 448):
        self.tok = tokenizer
        self.corpus = corpus
        self.rng = rng
        self.long_length = long_length

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
                seqs.append(self._pack(self.corpus.prefix, self.long_length, review_share=0.9))
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
def greedy_accuracy(model, tok, items: list[tuple[str, str]], max_new: int = 6,
                    grade=None, stop_tokens=None) -> float:
    """Exact match of greedy continuations (stopping at a newline), as lm-eval scores them.
    Prompts of the same token length decode together, unpadded, so batching changes nothing
    a model sees. `grade(continuation, answer) -> bool` replaces the exact match;
    `stop_tokens` the newline and EOS tokens that end a continuation (empty: none does)."""
    model.eval()
    if stop_tokens is None:
        stop_tokens = {i for t, i in tok.get_vocab().items() if "Ċ" in t} | {
            model.cfg.eos_token_id}
    if grade is None:
        def grade(continuation: str, answer: str) -> bool:
            return continuation.strip() == answer.strip()
    device = next(model.parameters()).device
    by_length: dict[int, list[tuple[list[int], str]]] = {}
    for prompt, answer in items:
        ids = tok.encode(prompt).ids
        by_length.setdefault(len(ids), []).append((ids, answer))
    correct = 0
    for group in by_length.values():
        seqs = torch.tensor([ids for ids, _ in group], device=device)
        for _ in range(max_new):
            logits, _ = model(seqs, with_mtp=False)
            seqs = torch.cat([seqs, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        prompt_length = len(group[0][0])
        for row, (_, answer) in zip(seqs[:, prompt_length:].tolist(), group):
            out = []
            for token in row:
                if token in stop_tokens:
                    break
                out.append(token)
            correct += grade(tok.decode(out), answer)
    model.train()
    return correct / max(1, len(items))


def train(tokenizer, corpus: Corpus, eval_sets: dict[str, list[tuple[str, str]]], out_dir: Path,
          *, seed: int, steps: int, batch_size: int, long_every: int, lr: float,
          stop_at: dict[str, float] | None = None,
          validation: dict[str, list[tuple[str, str]]] | None = None, log=print,
          build_model=None, save_model=None, long_length: int = 448, device: str = "cpu",
          time_budget_s: float | None = None, sampler=None, validate=None) -> dict:
    """Trains for `steps` steps, or stops early once every validation set's greedy accuracy
    reaches its `stop_at` level (checked every 100 steps). Early stopping keeps the model
    away from 100% on the easy task, so that optimizations can flip answers both ways.

    `build_model(tokenizer)` and `save_model(model, out_dir)` default to the tiny Qwen2 +
    MiMo MTP model; any model whose forward returns (logits, MTP logits) and that has
    `cfg.eos_token_id` and `hf_config()` trains the same way. `time_budget_s`: stop (and
    save) at the first log step past this many seconds of training. `sampler`: anything with
    `batch(size, long) -> (ids, weights)`; default: SequenceSampler over `corpus`.
    `validate(model) -> {name: accuracy}`: the validation measure (default: greedy exact
    match on each of `validation`'s sets)."""
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = (build_model or _tiny_model)(tokenizer).to(device)
    sampler = sampler or SequenceSampler(tokenizer, corpus, random.Random(seed),
                                         long_length=long_length)
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
        ids, weights = ids.to(device), weights.to(device)
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
            if stop_at and (validation or validate) and step >= steps // 3:
                entry["validation"] = validate(model) if validate else {
                    name: greedy_accuracy(model, tokenizer, validation[name]) for name in stop_at}
                model.train()
            history.append(entry)
            log(json.dumps(entry))
            if "validation" in entry and all(entry["validation"][k] >= v
                                             for k, v in stop_at.items()):
                log(json.dumps({"stopped_early_at_step": step}))
                break
            if time_budget_s is not None and time.time() - started > time_budget_s:
                log(json.dumps({"stopped_at_time_budget": step}))
                break
    accuracy = {name: greedy_accuracy(model, tokenizer, items) for name, items in eval_sets.items()}
    log(json.dumps({"greedy_accuracy_fp32": accuracy}))
    (save_model or save)(model.cpu(), out_dir)
    return {"config": model.hf_config(), "history": history, "train_seconds": time.time() - started,
            "steps_run": step + 1,
            "greedy_accuracy_fp32": accuracy,
            "parameters": sum(p.numel() for p in model.parameters())}


def write_record(result: dict, out_dir: Path, *, seed: int, max_steps: int, **settings) -> dict:
    """training.json: what train() returned (its history, times, accuracy), the seed, the
    step budget and the run's other settings."""
    record = {k: v for k, v in result.items() if k != "config"}
    record.update(seed=seed, max_steps=max_steps, steps=result["steps_run"], **settings)
    (out_dir / "training.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")
    return record


def _tiny_model(tokenizer) -> TinyMTPModel:
    return TinyMTPModel(TinyConfig(vocab_size=tokenizer.get_vocab_size(),
                                   eos_token_id=tokenizer.token_to_id("<|endoftext|>")))


def save(model: TinyMTPModel, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.to(torch.bfloat16) for k, v in model.hf_state_dict().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(
        json.dumps(model.cfg.hf_config(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    gen = {"eos_token_id": model.cfg.eos_token_id, "bos_token_id": model.cfg.eos_token_id}
    (out_dir / "generation_config.json").write_text(
        json.dumps(gen, indent=2, sort_keys=True) + "\n", encoding="utf-8")
