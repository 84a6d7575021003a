"""Does the engine vLLM resolved give the needle-recall tasks a chance to trigger #43559?

The recall tasks (tasks/recall, scripts/build_recall_tasks.py) record in `metadata.trigger`
the Mamba block size their prompts were sized for, their prompt lengths and wave sizes.
Whether vLLM can reach the hybrid prefix-cache mechanisms with them is a matter of the
engine's resolved geometry, as vLLM's own regression test checks it
(tests/v1/e2e/test_hybrid_mamba_prefix_cache_correctness.py): the scheduler splits
prefill chunks on `cache_config.block_size`, which must equal the Mamba block size; a cold
race needs a wave 1 strictly between one and two Mamba blocks, chunked prefill, a per-step
token budget too small for the wave's prompts in flight together, and a wave 2 long enough
for a hit; a multi-turn wave 1 must end below the second block boundary and decode across
it, and its wave 2 must be long enough for a hit.

How many whole blocks a hit needs (vLLM 0.26.0's source, docs/recall.md "Why the cold
race found no cache hit"): a request hits at most `prompt - 1` tokens
(`KVCacheManager.get_computed_blocks`), in whole blocks; with an EAGLE-style drafter (MTP
included: `SpeculativeConfig.use_eagle`) the attention lookup then drops its last matched
block (`FullAttentionManager.find_longest_cache_hit`) and the scheduler pulls the last
Mamba boundary it stops a prefill chunk at back one block
(`Scheduler._mamba_block_aligned_split`). So a prompt hits from B + 1 tokens without such
a drafter and only from 2 B + 1 tokens with one. With such a drafter a wave-1 prompt of at
most 2 B tokens is not stopped at any block boundary, so a chunk that ends inside the first
block leaves its state there, and that block is cached as the state at B when the request
runs on: the cold race's budget must make the second prompt's first chunk end there
(between one prompt and one prompt plus a block), and wave 2, past 2 B and sharing two
blocks, hits it.

`geometry_problems` is pure (a trigger and a flattened effective config in, sentences out,
each naming the value to change); `check_trigger_geometry` applies it to every arm that
runs a hybrid model with prefix caching on, once vLLM resolved the arms, and stops the run
(exit 2) on the first arm that cannot trigger. Arms without a Mamba cache (a dense model,
prefix caching off) are not checked: there is nothing to mistarget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from evals.errors import UserError
from evals.paths import TASKS_DIR


@dataclass(frozen=True, slots=True)
class Trigger:
    """A recall task's `metadata.trigger` (written by scripts/build_recall_tasks.py)."""

    task: str
    mechanism: str  # cold_race | multi_turn
    block_tokens: int
    prompt_tokens: tuple[int, int]  # wave 1's shortest and longest prompt
    wave1_prompts: int
    min_tokens: int = 0  # multi_turn: tokens wave 1 decodes at least
    # wave 2's shortest and longest prompt, and (cold race) the tokens all of them share
    wave2_prompt_tokens: tuple[int, int] | None = None
    wave2_shared_tokens: int | None = None


class _IgnoreTags(yaml.SafeLoader):
    """Reads a task YAML's metadata without importing its `!function` modules."""


_IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)


def task_triggers(names: Iterable[str], include_paths: Iterable[str | Path] = (TASKS_DIR,)
                  ) -> dict[str, Trigger]:
    """The triggers of the named tasks that declare one, found under the include paths."""
    wanted, found = set(names), {}
    for root in include_paths:
        for path in sorted(Path(root).rglob("*.yaml")):
            try:
                data = yaml.load(path.read_text(encoding="utf-8"), Loader=_IgnoreTags)
            except (OSError, yaml.YAMLError):
                continue  # not a task file we can read; lm-eval reports real task errors
            if not isinstance(data, dict) or data.get("task") not in wanted:
                continue
            trigger = (data.get("metadata") or {}).get("trigger")
            if isinstance(trigger, dict):
                found[data["task"]] = Trigger(
                    task=data["task"], mechanism=str(trigger["mechanism"]),
                    block_tokens=int(trigger["block_tokens"]),
                    prompt_tokens=tuple(int(t) for t in trigger["prompt_tokens"]),
                    wave1_prompts=int(trigger["wave1_prompts"]),
                    min_tokens=int(trigger.get("min_tokens", 0)),
                    wave2_prompt_tokens=(tuple(int(t) for t in trigger["wave2_prompt_tokens"])
                                         if "wave2_prompt_tokens" in trigger else None),
                    wave2_shared_tokens=(int(trigger["wave2_shared_tokens"])
                                         if "wave2_shared_tokens" in trigger else None))
    return found


def applies(effective: Mapping) -> bool:
    """A hybrid model's engine with prefix caching on (vLLM caches Mamba states)."""
    return (bool(effective.get("cache.enable_prefix_caching"))
            and effective.get("cache.mamba_cache_mode") not in (None, "none")
            and effective.get("cache.mamba_block_size") is not None)


def mamba_block(effective: Mapping, requested: Mapping) -> int | None:
    """The Mamba block size the engine will cache states at. Resolved before engine start,
    `cache.mamba_block_size` is final only where the arm sets `mamba_block_size`; otherwise
    align mode sets it to the attention block size (`cache.block_size`) when the engine
    allocates its cache (recorded on vLLM 0.32: resolved 16, running 128 in every KV-cache
    group; tests/fixtures/recall_geometry/cpu_hybrid_running_kv_groups.json)."""
    if "mamba_block_size" in requested:
        return effective.get("cache.mamba_block_size")
    return effective.get("cache.block_size")


# vLLM 0.26.0's SpeculativeConfig.use_eagle(): drafters fed the target's hidden states, for
# which the prefix-cache lookup drops the last matched attention block
EAGLE_METHODS = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})


def eagle_method(effective: Mapping) -> str | None:
    """The arm's speculative method when it is EAGLE-style (MTP included), else None."""
    method = effective.get("speculative.method")
    return method if method in EAGLE_METHODS else None


def hit_blocks(effective: Mapping) -> int:
    """Whole blocks a prompt must exceed before it can hit the prefix cache: 1, or 2 under an
    EAGLE-style drafter (module docstring)."""
    return 2 if eagle_method(effective) else 1


def _too_short(what: str, low: int, high: int, block: int, effective: Mapping) -> str:
    need = hit_blocks(effective)
    if need == 1:
        return (f"{what} ({low}-{high} tokens) do not pass one {block}-token block, so no "
                f"block of theirs can be hit: rebuild the task (--blocks {block})")
    return (f"{what} ({low}-{high} tokens) are at most two {block}-token blocks long, and "
            f"with speculative method `{eagle_method(effective)}` vLLM 0.26 hits none of "
            f"them: the lookup drops the last matched attention block and the scheduler "
            f"stops chunks one block before the prompt's last boundary, so a hit needs "
            f"{2 * block + 1} tokens or more: rebuild the task "
            f"(scripts/build_recall_tasks.py --blocks {block}) or drop "
            f"`speculative_config`")


def geometry_problems(trigger: Trigger, effective: Mapping,
                      requested: Mapping | None = None) -> list[str]:
    """Why this resolved engine (`requested`: the arm's engine arguments) cannot reach the
    trigger's mechanism; [] when it can."""
    split = effective.get("cache.block_size")
    mamba = mamba_block(effective, requested or {})
    problems = []
    if split != mamba:
        problems.append(
            f"vLLM splits prefill chunks on cache.block_size {split} but caches Mamba states "
            f"every {mamba} tokens (mamba_block_size), so chunk ends are not Mamba "
            f"block ends: set engine `block_size` and `mamba_block_size` both to "
            f"{trigger.block_tokens}")
    if mamba != trigger.block_tokens:
        problems.append(
            f"the task's prompts are sized for {trigger.block_tokens}-token Mamba blocks, vLLM "
            f"resolved {mamba}: set engine `block_size` and `mamba_block_size` to "
            f"{trigger.block_tokens}, or use the task built for {mamba} "
            f"(scripts/build_recall_tasks.py --blocks {mamba})")
    block = trigger.block_tokens
    low, high = trigger.prompt_tokens
    if trigger.mechanism == "cold_race":
        problems += _cold_race(trigger, effective, block, low, high)
    elif trigger.mechanism == "multi_turn":
        if not block < low <= high < 2 * block:
            problems.append(f"wave 1's prompts ({low}-{high} tokens) must end between one and "
                            f"two {block}-token blocks: rebuild the task (--blocks {block})")
        if high + trigger.min_tokens <= 2 * block:
            problems.append(f"wave 1 decodes {trigger.min_tokens} tokens from {high}, never "
                            f"crossing the block boundary at {2 * block}: raise the task's "
                            "min_tokens (rebuild it)")
        if trigger.wave2_prompt_tokens is not None:
            low2, high2 = trigger.wave2_prompt_tokens
            if low2 <= hit_blocks(effective) * block:
                problems.append(_too_short("wave 2's prompts", low2, high2, block, effective))
    return problems


def _cold_race(trigger: Trigger, effective: Mapping, block: int, low: int, high: int
               ) -> list[str]:
    problems = []
    if not 1.05 * block < low <= high < 1.95 * block:
        problems.append(f"the cold prompts ({low}-{high} tokens) are not strictly between one "
                        f"and two {block}-token blocks: rebuild the task (--blocks {block})")
    # a task written before wave 2 had its own lengths recorded: its range covered both waves
    low2, high2 = trigger.wave2_prompt_tokens or (low, high)
    need = hit_blocks(effective) * block
    if low2 <= need:
        problems.append(_too_short("wave 2's prompts", low2, high2, block, effective))
    elif trigger.wave2_shared_tokens is not None and trigger.wave2_shared_tokens < need:
        problems.append(f"wave 2's prompts share {trigger.wave2_shared_tokens} tokens, fewer "
                        f"than the {need} whose blocks a hit needs cached: rebuild the task "
                        f"(--blocks {block})")
    if not effective.get("scheduler.enable_chunked_prefill"):
        problems.append("chunked prefill is off, so no prefill is split mid-block: set engine "
                        "`enable_chunked_prefill: true`")
    seqs = effective.get("scheduler.max_num_seqs") or 0
    budget = effective.get("scheduler.max_num_batched_tokens") or 0
    if seqs < 2:
        problems.append(f"max_num_seqs {seqs} runs the cold prompts one at a time, with no "
                        "race: set engine `max_num_seqs` to 8")
    in_flight = min(seqs, trigger.wave1_prompts) * high
    if seqs >= 2 and budget >= in_flight:
        together = min(seqs, trigger.wave1_prompts)
        problems.append(f"max_num_batched_tokens {budget} fits all {together} cold prompts "
                        f"in flight ({in_flight} tokens) in one step, so no prefill "
                        f"is split: set engine `max_num_batched_tokens` below {in_flight} (and "
                        f"at least {block}), e.g. {2 * block}")
    method = eagle_method(effective)
    if method and seqs >= 2 and not high < budget < low + block:
        problems.append(f"max_num_batched_tokens {budget} does not end the second cold "
                        f"prompt's first chunk inside the first block (with speculative "
                        f"method `{method}` vLLM 0.26 stops no wave-1 chunk on a block "
                        f"boundary, so only the budget puts a chunk end there): set engine "
                        f"`max_num_batched_tokens` between {high + 1} and {low + block - 1}, "
                        f"e.g. {2 * block}")
    return problems


def check_trigger_geometry(source: str, tasks: Iterable[str], include_paths: Iterable,
                           effective: Mapping[str, Mapping | None],
                           requested: Mapping[str, Mapping] | None = None) -> list[str]:
    """Stops (UserError, exit 2) when an arm that caches Mamba states cannot trigger a recall
    task's mechanism; returns one line per checked arm and task otherwise. `requested`: each
    arm's engine arguments."""
    triggers = task_triggers(tasks, include_paths)
    checked = []
    for arm, config in effective.items():
        if not config or not applies(config):
            continue
        for trigger in triggers.values():
            problems = geometry_problems(trigger, config, (requested or {}).get(arm))
            if problems:
                raise UserError(f"{source}: arm `{arm}` cannot trigger the {trigger.mechanism} "
                                f"mechanism of task `{trigger.task}`: {problems[0]}"
                                + (f" ({len(problems) - 1} more: {'; '.join(problems[1:])})"
                                   if len(problems) > 1 else ""))
            checked.append(f"{arm}: {trigger.task} geometry holds (block "
                           f"{trigger.block_tokens}, budget "
                           f"{config.get('scheduler.max_num_batched_tokens')})")
    return checked
