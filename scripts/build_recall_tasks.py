"""Writes the needle-recall tasks (tasks/recall/): a facility "manual" with vault access codes
(needles) among filler sentences, asked back after the manual, in the two shapes that reach
the hybrid prefix-cache mechanisms of vLLM #43559 (the shapes of vLLM's own regression test,
tests/v1/e2e/test_hybrid_mamba_prefix_cache_correctness.py):

* cold race (`recall_cold_race_b<B>`): wave 1 is 16 identical cold prompts between one and
  two Mamba blocks of B tokens long (about 1.25 B), all in flight at once, so a per-step
  token budget under one prompt plus one block makes the second prompt's first chunk end
  inside the first block; wave 2 asks every vault in four phrasings after the manual and
  a shared appendix of notes, between two and three blocks long (about 2.25 B). With MTP
  (any EAGLE-style drafter) vLLM 0.26 hits no prompt of at most 2 B tokens, so wave 1
  cannot hit what it cached; wave 2 can, resuming from the first block's cached state
  (docs/recall.md, "Why the cold race found no cache hit").
* multi-turn (`recall_multiturn_b<B>`): wave 1 is 32 prompts that end just below the
  second block boundary and ask for a code and then the manual's closing notice (at least
  `min_tokens` generated, so decode crosses the boundary and the block there is written
  during decode, under MTP during speculative decode); wave 2 re-sends each wave-1
  prompt with its reference reply (the code and the notice) and asks another vault.

* the same two shapes over several manuals, for a study whose parts must show
  non-inferiority (about 90 independent items with no flip for a 3-point margin):
  `recall_cold_race_many_b<B>` repeats the cold race for COLD_MANUALS manuals,
  each its own cold wave (listed in `metadata.fresh_waves`: no earlier wave shares its
  prefix) and then its question wave, so every manual meets the race as the one-manual
  task's does; `recall_multiturn_many_b<B>` has one conversation per vault of each of
  MULTI_TURN_MANUALS manuals, so no two wave-1 prompts are the same. Each item's `group`
  names the items one corrupted state answers together (a manual's identical cold
  prompts, a vault's phrasings, a conversation), the task's cluster.

Every item has a `wave` field; the task's `metadata.waves` names it, and the runner runs
wave 1's items as one batch, then wave 2's (evals.runner.waves). Lengths are counted in
tokens of the bundled tokenizer (models/tiny-reviews, shared by models/tiny-hybrid), and
the task's `metadata.trigger` records them for the geometry check
(evals.preflight.recall_geometry). Deterministic: the same seed and block sizes write the
same files byte for byte.

Usage: python scripts/build_recall_tasks.py [--blocks 128 192 256] [--many-blocks 128]
                                            [--seed 2026]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TASK_DIR = ROOT / "tasks" / "recall"
TOKENIZER = ROOT / "models" / "tiny-reviews" / "tokenizer.json"
COLD_PROMPTS = 16
MULTI_TURN_PROMPTS = 32
# the many-manual tasks (manual 0 is the one-manual task's): 16 manuals each
COLD_MANUALS, MULTI_TURN_MANUALS = 16, 16
# cold race: wave 1 ends inside the second block (at most 2 B tokens, so under MTP no wave-1
# chunk stops on a block boundary); wave 2 inside the third (past 2 B, so it can hit)
COLD_BLOCKS = 1.35
COLD_WAVE2_BLOCKS = 2.35
APPENDIX = "Notes.\n"
CODE_DIGITS = 4
CODE_PATTERN = rf"(\d{{{CODE_DIGITS}}})"  # a code: what the tasks' filter grades, the first one
FILLERS = (
    "Visitors sign the register at the front desk.",
    "Lights in the east wing switch off at ten.",
    "Report a broken lock to the night guard.",
    "The loading dock opens only on weekdays.",
    "Spare keys stay in the locked steel cabinet.",
    "Fire doors must never be propped open.",
    "Each guard walks the north corridor twice a shift.",
    "Deliveries are checked against the daily list.",
)
HEADER = "Facility manual. Remember every vault code.\n"
FOOTER = "End of manual.\n"
NOTICE = "Closing notice:"


PHRASINGS = ("Q: code of vault-{v:02d}?\nA:", "Q: vault-{v:02d} code?\nA:",
             "Q: what is the code of vault-{v:02d}?\nA:", "Q: give the vault-{v:02d} code.\nA:")


def question(vault: int, phrasing: int = 0) -> str:
    return PHRASINGS[phrasing].format(v=vault)


def notice_question(vault: int) -> str:
    return f"Q: code of vault-{vault:02d}, then the closing notice?\nA:"


class Counter:
    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path))

    def __call__(self, text: str) -> int:
        return len(self._tok.encode(text).ids)


def build_manual(count: Counter, target: int, rng: random.Random) -> tuple[str, list[str]]:
    """A manual of about `target` tokens: needles spread evenly among filler sentences,
    grown one filler at a time until the next one would pass `target`."""
    needles = max(3, target // 45)
    codes = [f"{rng.randrange(10 ** CODE_DIGITS):0{CODE_DIGITS}d}" for _ in range(needles)]

    def text(fill: int) -> str:
        parts = [HEADER]
        for i in range(needles):
            per = fill // needles + (1 if i < fill % needles else 0)
            start = sum(fill // needles + (1 if j < fill % needles else 0) for j in range(i))
            parts += [FILLERS[(start + k) % len(FILLERS)] + "\n" for k in range(per)]
            parts.append(f"Vault-{i:02d} code is {codes[i]}.\n")
        return "".join(parts) + FOOTER

    fill = 0
    while count(text(fill + 1)) <= target:
        fill += 1
    return text(fill), codes


def closing_notice(count: Counter, min_tokens: int) -> str:
    """The text wave 1 of the multi-turn task copies: at least `min_tokens` tokens."""
    parts, k = [NOTICE], 0
    while count(" ".join(parts)) < min_tokens:
        parts.append(FILLERS[k % len(FILLERS)])
        k += 1
    return " ".join(parts)


def cold_race(count: Counter, block: int, seed: int) -> tuple[list[dict], dict]:
    rng = random.Random(f"{seed}-cold-{block}")
    longest = max(count(question(v, k)) for v in range(100) for k in range(len(PHRASINGS)))
    manual, codes = build_manual(count, int(block * COLD_BLOCKS) - longest, rng)
    probe = len(codes) - 2  # near the end of the manual, where even weak recall holds
    rows = [{"wave": 1, "vault": probe, "prompt": manual + question(probe),
             "code": codes[probe]} for _ in range(COLD_PROMPTS)]
    shared = manual + appendix(count, manual, int(block * COLD_WAVE2_BLOCKS) - longest)
    # every vault in every phrasing: distinct prompts that share the manual wave 1 cached
    # and an appendix, long enough to hit the cache under MTP
    rows += [{"wave": 2, "vault": v, "prompt": shared + question(v, k), "code": code}
             for k in range(len(PHRASINGS)) for v, code in enumerate(codes)]
    wave1 = [count(r["prompt"]) for r in rows if r["wave"] == 1]
    wave2 = [count(r["prompt"]) for r in rows if r["wave"] == 2]
    trigger = {"mechanism": "cold_race", "block_tokens": block,
               "prompt_tokens": [min(wave1), max(wave1)],
               "wave2_prompt_tokens": [min(wave2), max(wave2)],
               "wave2_shared_tokens": count(shared), "wave1_prompts": COLD_PROMPTS,
               "needles": len(codes)}
    return rows, trigger


def _manual_seed(seed: int, manual: int) -> str:
    return str(seed) if manual == 0 else f"{seed}-m{manual}"


def _spanning(triggers: list[dict]) -> dict:
    """The mechanism, block and prompt-length ranges that span every manual's trigger."""
    def span(key: str) -> list[int]:
        return [min(t[key][0] for t in triggers), max(t[key][1] for t in triggers)]

    return {"mechanism": triggers[0]["mechanism"], "block_tokens": triggers[0]["block_tokens"],
            "prompt_tokens": span("prompt_tokens"),
            "wave2_prompt_tokens": span("wave2_prompt_tokens")}


def cold_race_many(count: Counter, block: int, seed: int) -> tuple[list[dict], dict]:
    """The cold race over COLD_MANUALS manuals: manual m's cold wave is wave 2m + 1 and its
    question wave 2m + 2, so each cold wave starts on an idle engine as the one-manual
    task's wave 1 does."""
    rows, triggers = [], []
    for m in range(COLD_MANUALS):
        manual_rows, trigger = cold_race(count, block, _manual_seed(seed, m))
        triggers.append(trigger)
        for row in manual_rows:
            group = "cold" if row["wave"] == 1 else f"v{row['vault']:02d}"
            rows.append({**row, "wave": 2 * m + row["wave"], "manual": m,
                         "group": f"m{m:02d}-{group}"})
    trigger = {**_spanning(triggers),
               "wave2_shared_tokens": min(t["wave2_shared_tokens"] for t in triggers),
               "wave1_prompts": COLD_PROMPTS, "needles": min(t["needles"] for t in triggers),
               "manuals": COLD_MANUALS}
    return rows, trigger


def multi_turn_many(count: Counter, block: int, seed: int) -> tuple[list[dict], dict]:
    """The multi-turn shape over MULTI_TURN_MANUALS manuals, one conversation per vault of
    each (the one-manual task's first conversations): no two wave-1 prompts are the same."""
    rows, triggers = [], []
    for m in range(MULTI_TURN_MANUALS):
        manual_rows, trigger = multi_turn(count, block, _manual_seed(seed, m))
        triggers.append(trigger)
        needles = trigger["needles"]
        for row in manual_rows:
            if int(row["conversation_id"][1:]) >= needles:
                continue  # conversation i asks vault i % needles: the rest repeat
            conversation = f"m{m:02d}-{row['conversation_id']}"
            rows.append({**row, "manual": m, "conversation_id": conversation,
                         "group": conversation})
    trigger = {**_spanning(triggers),
               "min_tokens": max(t["min_tokens"] for t in triggers),
               "wave1_prompts": sum(1 for r in rows if r["wave"] == 1),
               "needles": min(t["needles"] for t in triggers),
               "manuals": MULTI_TURN_MANUALS}
    return rows, trigger


def appendix(count: Counter, manual: str, target: int) -> str:
    """Filler notes after the manual (no code in them), grown one sentence at a time until
    the next one would take manual and notes past `target` tokens."""
    parts, k = [APPENDIX], 0
    while count(manual + "".join(parts) + FILLERS[k % len(FILLERS)] + "\n") <= target:
        parts.append(FILLERS[k % len(FILLERS)] + "\n")
        k += 1
    return "".join(parts)


def multi_turn(count: Counter, block: int, seed: int) -> tuple[list[dict], dict]:
    """Wave-1 prompts end `gap` tokens below 2 B; the reply runs `gap + margin` past it."""
    rng = random.Random(f"{seed}-multiturn-{block}")
    gap, margin = max(24, block // 4), max(32, block // 4)
    longest = max(count(notice_question(v)) for v in range(100))
    manual, codes = build_manual(count, 2 * block - gap - longest, rng)
    min_tokens = gap + margin
    notice = closing_notice(count, min_tokens)
    rows = []
    for i in range(MULTI_TURN_PROMPTS):
        vault = i % len(codes)
        rows.append({"wave": 1, "vault": vault, "prompt": manual + notice_question(vault),
                     "code": codes[vault], "conversation_id": f"t{i:02d}"})
    for i, first in enumerate(rows[:MULTI_TURN_PROMPTS]):
        vault = (i * 7 + 3) % len(codes)
        reply = f" {first['code']}. {notice}\n\n"
        rows.append({"wave": 2, "vault": vault, "prompt": first["prompt"] + reply
                     + question(vault), "code": codes[vault],
                     "conversation_id": first["conversation_id"]})
    wave1 = [count(r["prompt"]) for r in rows if r["wave"] == 1]
    wave2 = [count(r["prompt"]) for r in rows if r["wave"] == 2]
    trigger = {"mechanism": "multi_turn", "block_tokens": block,
               "prompt_tokens": [min(wave1), max(wave1)],
               "wave2_prompt_tokens": [min(wave2), max(wave2)], "min_tokens": min_tokens,
               "wave1_prompts": MULTI_TURN_PROMPTS, "needles": len(codes)}
    return rows, trigger


def task_yaml(name: str, data: str, trigger: dict, seed: int,
              fresh_waves: list[int] | None = None) -> dict:
    gen = {"until": ["\n\n"], "max_gen_toks": trigger.get("min_tokens", 0) + 12,
           "do_sample": False, "temperature": 0.0}
    if "min_tokens" in trigger:
        gen["min_tokens"] = trigger["min_tokens"]  # decode crosses the block boundary
    return {
        "tag": ["recall"],
        "task": name,
        "custom_dataset": "!function data_loader.recall",
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "{{prompt}}",
        "doc_to_target": "{{code}}",
        "generation_kwargs": gen,
        # the first code-shaped number in the answer is graded
        "filter_list": [{"name": "code", "filter": [
            {"function": "regex", "regex_pattern": CODE_PATTERN,
             "group_select": 0, "fallback": "[none]"},
            {"function": "take_first"}]}],
        "metric_list": [{"metric": "exact_match", "aggregation": "mean",
                         "higher_is_better": True}],
        "metadata": {"version": 1.0, "data": data, "seed": seed, "waves": "wave",
                     **({"fresh_waves": fresh_waves} if fresh_waves else {}),
                     "trigger": trigger},
    }


LOADER = '''"""Loads a needle-recall task's items (written by scripts/build_recall_tasks.py).

lm-eval passes the task's `metadata` to `custom_dataset`; `data` names the file.
"""

from pathlib import Path

import datasets

DATA = Path(__file__).resolve().parent / "data"


def recall(data: str, **_metadata) -> datasets.DatasetDict:
    return datasets.DatasetDict(
        {"test": datasets.Dataset.from_json(str(DATA / f"{data}.jsonl"))})
'''


def write(blocks: list[int], seed: int, task_dir: Path = TASK_DIR, *,
          many_blocks: list[int] = (128,), echo=print) -> list[Path]:
    count = Counter(TOKENIZER)
    (task_dir / "data").mkdir(parents=True, exist_ok=True)
    (task_dir / "data_loader.py").write_text(LOADER, encoding="utf-8")
    written = []
    shapes = [(block, shape, build) for block in blocks for shape, build in
              (("cold_race", cold_race), ("multiturn", multi_turn))]
    shapes += [(block, shape, build) for block in many_blocks for shape, build in
               (("cold_race_many", cold_race_many), ("multiturn_many", multi_turn_many))]
    for block, shape, build in shapes:
        rows, trigger = build(count, block, seed)
        fresh = sorted({r["wave"] for r in rows if r["wave"] % 2 == 1} - {1}) \
            if shape == "cold_race_many" else None
        data = f"{shape}_b{block}"
        (task_dir / "data" / f"{data}.jsonl").write_text(
            "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
        name = f"recall_{data}"
        text = yaml.safe_dump(task_yaml(name, data, trigger, seed, fresh),
                              sort_keys=False, allow_unicode=True)
        # lm-eval's constructor tag, which safe_dump would quote as a plain string
        text = text.replace("'!function data_loader.recall'", "!function data_loader.recall")
        path = task_dir / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        written.append(path)
        echo(f"{name}: {len(rows)} items, {json.dumps(trigger)}")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[128, 192, 256],
                        help="Mamba block sizes in tokens, one task pair each")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--many-blocks", type=int, nargs="*", default=[128],
                        help="block sizes that also get the many-manual task pair")
    args = parser.parse_args()
    write(args.blocks, args.seed, many_blocks=args.many_blocks)


if __name__ == "__main__":
    main()
