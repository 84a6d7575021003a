"""The recalling hybrid's training items (scripts/build_recall_hybrid.py): the recall tasks'
shapes, never their prompts, the codes weighted in the loss, batches padded at weight 0."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _module():
    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location(
        "build_recall_hybrid", REPO / "scripts" / "build_recall_hybrid.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_items_have_the_task_shapes_and_never_a_task_prompt():
    build = _module()
    count = build.recall.Counter(build.TOKENIZER_FROM / "tokenizer.json")
    rng = random.Random("recall-train-7")
    items = [build.training_item(count, rng) for _ in range(60)]
    shipped = {json.loads(line)["prompt"]
               for path in (REPO / "tasks" / "recall" / "data").glob("*.jsonl")
               for line in path.read_text(encoding="utf-8").splitlines()}
    shapes = {len(spans) for spans in items}
    assert shapes == {3, 6}  # cold race: code; multi-turn: code, notice, second code
    for spans in items:
        prompt = spans[0][0]
        assert prompt.startswith(build.recall.HEADER) and prompt not in shipped
        codes = [text.strip() for text, weight in spans if weight == build.ANSWER_WEIGHT]
        assert codes and all(f"code is {code}." in prompt for code in codes)


def test_batches_pad_with_eos_at_weight_zero():
    from tokenizers import Tokenizer

    build = _module()
    tokenizer = Tokenizer.from_file(str(build.TOKENIZER_FROM / "tokenizer.json"))
    items = [[("Q: a?\nA:", 1.0), (" 1234", 5.0)], [("Q:\nA:", 1.0), (" 9", 5.0)]]
    sampler = build.RecallSampler(tokenizer, items, random.Random(0), eos=0)
    ids, weights = sampler.batch(8, long=False)
    assert ids.shape == weights.shape and ids.shape[0] == 8
    short = [row for row in range(8) if weights[row, -1] == 0]
    assert short and all(ids[row, -1] == 0 for row in short)
    assert set(weights.flatten().tolist()) <= {0.0, 1.0, 5.0}
