"""vLLM general plugin (entry point `vllm.general_plugins`): injects the arm's canary faults.

vLLM calls `register()` in every process it starts (engine core, workers) and in the
process that builds the engine arguments. Without `EVALS_FAULTS` in the environment it
returns at once and patches nothing: an arm that did not ask for a fault runs the
unmodified engine. With it, it refuses a vLLM version the patches were not written for,
then wraps the few internals each fault lives in (see `evals.faults.catalog` for the bugs
they model). Each fault counts how often it fired; with `EVALS_FAULTS_TALLY` set, the
counts go to `<dir>/<pid>.json`, so the run can show that the fault really touched items.

This module imports vLLM and torch: it runs only inside vLLM's processes.
"""

from __future__ import annotations

import json
import os

import numpy as np

from evals.faults.catalog import (ENV_VAR, check_vllm_version, decode_env, fault_fires,
                                  installed_vllm)

TALLY_ENV = "EVALS_FAULTS_TALLY"
PREFIX_FAULTS = ("prefix_hit_overrun", "prefix_key_collision")
KV_SCALE_ERROR = 4.0  # the wrong scale is off by this factor

_applied: set[str] = set()
_tally: dict[str, int] = {}
_tally_fd: list[int] = []
_TALLY_WIDTH = 512


def _count(name: str, n: int = 1) -> None:
    """Adds to this process's tally and rewrites `<dir>/<pid>.json` in place (one pwrite of a
    fixed-width record: cheap enough for every firing, and current when vLLM kills the
    process at shutdown without running exit handlers)."""
    _tally[name] = _tally.get(name, 0) + n
    folder = os.environ.get(TALLY_ENV)
    if not folder:
        return
    if not _tally_fd:
        os.makedirs(folder, exist_ok=True)
        _tally_fd.append(os.open(os.path.join(folder, f"{os.getpid()}.json"),
                                 os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    # evals.record.records.FAULT_TALLY, version 1
    record = json.dumps({"schema_version": 1, "fired": _tally}).encode().ljust(_TALLY_WIDTH)
    os.pwrite(_tally_fd[0], record, 0)


def _tokens_bytes(token_ids) -> bytes:
    return np.asarray(list(token_ids), dtype=np.int64).tobytes()


def _patch_prefix_lookup(faults: dict[str, dict]) -> None:
    """The prefix-cache lookup, wrapped for the prefix faults:

    * prefix_hit_overrun - on a hit, one block more than the cached prefix is reported as
      computed: the request's block table gets its last cached block a second time, so the
      first block of its own (uncached) tokens attends to stale KV: the #43559 shape.
      `only_with_spec_decode` makes it fire only in an engine with speculative decoding.
    * prefix_key_collision - the first block after the cached prefix (block 0 on a miss)
      is matched to the block another prompt cached at the same position (the previous
      request that reached it), as if their cache keys collided."""
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.scheduler import Scheduler

    original_init = Scheduler.__init__
    original_lookup = KVCacheManager.get_computed_blocks
    overrun = faults.get("prefix_hit_overrun")
    collision = faults.get("prefix_key_collision")
    # block index -> hash of the last request's first uncached block there: the block a
    # colliding key finds is another prompt's block at the same position
    recent_block_at: dict[int, bytes] = {}

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self.kv_cache_manager._evals_spec_decode = self.vllm_config.speculative_config is not None

    def cached_prefix(self, request, hit: list, block_size: int) -> list:
        """The hit, extended over every further block that is in the cache (the block that
        speculative decoding drops from a hit is cached and correct): the longest prefix
        that really was computed before."""
        blocks = list(hit)
        while len(blocks) < len(request.block_hashes) and \
                (len(blocks) + 1) * block_size <= request.num_tokens - 1:
            found = self.block_pool.get_cached_block(request.block_hashes[len(blocks)], [0])
            if not found:
                break
            blocks.append(found[0])
        return blocks

    def get_computed_blocks(self, request):
        blocks, num_computed, boundary = original_lookup(self, request)
        block_size = getattr(self.coordinator, "block_size", 0)
        if not self.prefix_cache_lookup_enabled(request) or not block_size \
                or len(request.block_hashes) != request.num_tokens // block_size:
            return blocks, num_computed, boundary  # block hashes at another granularity
        groups = blocks.blocks if num_computed > 0 else ([],)
        if len(groups) != 1:
            return blocks, num_computed, boundary  # hybrid models: not modeled here
        content = _tokens_bytes(request.prompt_token_ids)
        corrupted, name = None, None
        if overrun and groups[0] and (getattr(self, "_evals_spec_decode", False)
                                      or not overrun.get("only_with_spec_decode")) \
                and fault_fires(overrun["name"], content, float(overrun["rate"])):
            prefix = cached_prefix(self, request, groups[0], block_size)
            # one block more than was computed: it gets the last cached block's KV again
            corrupted, name = prefix + [prefix[-1]], overrun["name"]
        elif collision:
            prefix = cached_prefix(self, request, groups[0], block_size)
            index = len(prefix)
            if index < len(request.block_hashes):
                own = request.block_hashes[index]
                other = recent_block_at.get(index)
                recent_block_at[index] = own
                found = self.block_pool.get_cached_block(other, [0]) \
                    if other is not None and other != own else None
                if found and fault_fires(collision["name"], content, float(collision["rate"])):
                    corrupted, name = prefix + [found[0]], collision["name"]
        if corrupted is None or len(corrupted) * block_size > request.num_tokens - 1:
            return blocks, num_computed, boundary  # no further full block to corrupt
        _count(name)
        return self.create_kv_cache_blocks((corrupted,)), len(corrupted) * block_size, boundary

    Scheduler.__init__ = init
    KVCacheManager.get_computed_blocks = get_computed_blocks


def _garbage_token(token: int, position: int, vocab: int) -> int:
    other = (token * 7919 + 104729 + position) % vocab
    return other if other != token else (other + 1) % vocab


def _patch_spec_unverified(fault: dict) -> None:
    """Speculative decoding with a broken draft and no verification: at a `rate` share of
    draft positions (chosen by the draft token, its position and the sequence length) the
    proposer's token is replaced by an unrelated one - what a draft head with garbage
    weights proposes - and the rejection sampler keeps it even when the target model
    rejects it, followed by the target's token for the next position. The target's forward
    pass sees the token it emits, so the KV cache stays consistent with the output."""
    import torch
    from vllm.v1.sample.rejection_sampler import PLACEHOLDER_TOKEN_ID
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    name, rate = fault["name"], float(fault["rate"])
    original_propose = GPUModelRunner.propose_draft_token_ids
    original_sample = GPUModelRunner._sample
    broken: dict[str, dict[int, int]] = {}  # request id -> {draft position: token}

    def propose_draft_token_ids(self, *args, **kwargs):
        drafts = original_propose(self, *args, **kwargs)
        is_tensor = torch.is_tensor(drafts)
        rows = drafts.tolist() if is_tensor else [list(r) for r in drafts]
        req_ids, vocab = self.input_batch.req_ids, self.input_batch.vocab_size
        changed = False
        for i, row in enumerate(rows[:len(req_ids)]):
            length = int(self.input_batch.num_tokens_no_spec[i])
            for j, token in enumerate(row):
                if token >= 0 and fault_fires(name, _tokens_bytes((token, j, length)), rate):
                    row[j] = _garbage_token(token, j, vocab)
                    broken.setdefault(req_ids[i], {})[j] = row[j]
                    changed = True
        if not changed:
            return drafts
        if is_tensor:
            return torch.tensor(rows, dtype=drafts.dtype, device=drafts.device)
        return rows

    def _sample(self, logits, spec_decode_metadata):
        if spec_decode_metadata is None or not broken:
            return original_sample(self, logits, spec_decode_metadata)
        target_choice = logits.argmax(dim=-1).tolist()  # before vLLM edits logits in place
        out = original_sample(self, logits, spec_decode_metadata)
        rows = out.sampled_token_ids.tolist()
        drafts = spec_decode_metadata.draft_token_ids.tolist()
        targets = spec_decode_metadata.target_logits_indices.tolist()
        bonus = spec_decode_metadata.bonus_logits_indices.tolist()
        start, fired = 0, 0
        for i, k in enumerate(spec_decode_metadata.num_draft_tokens):
            row, bad = rows[i], broken.pop(self.input_batch.req_ids[i], {})
            for j in range(k):
                draft = drafts[start + j]
                if row[j] == draft:
                    continue
                if row[j] != PLACEHOLDER_TOKEN_ID and bad.get(j) == draft:  # not verified
                    row[j] = draft
                    row[j + 1] = target_choice[targets[start + j + 1] if j + 1 < k else bonus[i]]
                    row[j + 2:] = [PLACEHOLDER_TOKEN_ID] * (len(row) - j - 2)
                    fired += 1
                break
            start += k
        if fired:
            _count(name, fired)
            out.sampled_token_ids = torch.tensor(rows, dtype=out.sampled_token_ids.dtype,
                                                 device=out.sampled_token_ids.device)
        return out

    GPUModelRunner.propose_draft_token_ids = propose_draft_token_ids
    GPUModelRunner._sample = _sample


# attention backends whose `do_kv_cache_update(layer, key, value, kv_cache, slot_mapping)`
# writes the KV cache: the CPU one (tested here) and the common GPU ones (not run here)
_KV_WRITERS = (("vllm.v1.attention.backends.cpu_attn", "CPUAttentionBackendImpl"),
               ("vllm.v1.attention.backends.flash_attn", "FlashAttentionImpl"),
               ("vllm.v1.attention.backends.triton_attn", "TritonAttentionImpl"),
               ("vllm.v1.attention.backends.flashinfer", "FlashInferImpl"))


def _patch_kv_scale(fault: dict) -> None:
    """FP8 KV cache: a `rate` share of tokens (chosen by their key vector's content) are
    written as if the scale were off by KV_SCALE_ERROR: their K and V are written again,
    multiplied by it, over the correct entry, so what attention reads back is wrong (and
    saturates where the product leaves FP8's range)."""
    import importlib

    import torch

    name, rate = fault["name"], float(fault["rate"])

    def wrap(original):
        def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping):
            original(self, layer, key, value, kv_cache, slot_mapping)
            if not str(getattr(self, "kv_cache_dtype", "")).startswith("fp8"):
                return
            n = slot_mapping.shape[0]
            first = key[:n].reshape(n, -1)[:, 0].float().contiguous().view(torch.int32)
            mixed = (first.to(torch.int64) * 2654435761 + 40503) % (2 ** 32)
            chosen = mixed < int(rate * 2 ** 32)
            if not bool(chosen.any()):
                return
            original(self, layer, (key[:n][chosen] * KV_SCALE_ERROR).contiguous(),
                     (value[:n][chosen] * KV_SCALE_ERROR).contiguous(), kv_cache,
                     slot_mapping[chosen].contiguous())
            _count(name, int(chosen.sum()))
        return do_kv_cache_update

    from vllm.platforms import current_platform

    writers = _KV_WRITERS[:1] if current_platform.is_cpu() else _KV_WRITERS[1:]
    for module_name, class_name in writers:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except Exception:  # a backend this build or device does not have
            continue
        if "do_kv_cache_update" in vars(cls):
            cls.do_kv_cache_update = wrap(cls.do_kv_cache_update)


def _patch_benign_tie_noise(fault: dict) -> None:
    """Before sampling, every logit of a `rate` share of rows (chosen by the row's top
    token) moves by up to half a bf16 rounding step (2^-9 of its size), with a
    deterministic pattern: only tokens within that distance of the top one can win."""
    import torch
    from vllm.v1.sample.sampler import Sampler

    name, rate = fault["name"], float(fault["rate"])
    original = Sampler.forward

    def forward(self, logits, sampling_metadata, *args, **kwargs):
        top = logits.argmax(dim=-1).to(torch.int64)
        rows = ((top * 2654435761 + 7) % (2 ** 32)) < int(rate * 2 ** 32)
        if bool(rows.any()):
            index = torch.arange(logits.shape[-1], device=logits.device, dtype=torch.float32)
            phase = index[None, :] * 12.9898 + top[:, None].to(torch.float32) * 78.233
            pattern = torch.frac(torch.sin(phase) * 43758.5453) * 2 - 1
            noise = logits.float().abs() * 2.0 ** -9 * pattern * rows[:, None]
            logits = (logits.float() + noise).to(logits.dtype)
            _count(name, int(rows.sum()))
        return original(self, logits, sampling_metadata, *args, **kwargs)

    Sampler.forward = forward


_PATCHES = {
    "spec_unverified": _patch_spec_unverified,
    "kv_scale": _patch_kv_scale,
    "benign_tie_noise": _patch_benign_tie_noise,
}


def register() -> None:
    text = os.environ.get(ENV_VAR)
    if not text:
        return  # inert: the arm asked for no fault
    problem = check_vllm_version(installed_vllm())
    if problem:
        raise RuntimeError(f"{ENV_VAR} is set, but {problem}.")
    faults = {f["name"]: f for f in decode_env(text) if f["name"] not in _applied}
    prefix = {n: f for n, f in faults.items() if n in PREFIX_FAULTS}
    if prefix:
        _patch_prefix_lookup(prefix)
    for name, fault in faults.items():
        if name not in PREFIX_FAULTS:
            _PATCHES[name](fault)
    _applied.update(faults)  # vLLM may load plugins more than once per process
