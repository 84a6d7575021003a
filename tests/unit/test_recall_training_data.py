"""The recalling hybrid's training items (scripts/build_recall_hybrid.py): the recall tasks'
shapes, never their prompts, the codes weighted in the loss, the curriculum's stages,
batches padded at weight 0."""

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


def _manual(spans) -> str:
    """The manual of a training item: its text up to the first question."""
    text = "".join(t for t, _ in spans)
    return text[:text.index("Q: ")]


def test_training_items_have_the_task_shapes_and_never_a_task_prompt():
    build = _module()
    count = build.recall.Counter(build.TOKENIZER_FROM / "tokenizer.json")
    rng = random.Random("recall-train-7")
    shipped = {json.loads(line)["prompt"]
               for path in (REPO / "tasks" / "recall" / "data").glob("*.jsonl")
               for line in path.read_text(encoding="utf-8").splitlines()}
    assert len(shipped) > 50
    notices, means = 0, []
    for stage, sizes in enumerate(build.STAGES):
        lengths = []
        for _ in range(40):
            spans = build.training_item(count, rng, stage)
            manual = _manual(spans)
            assert manual.startswith(build.recall.HEADER)
            assert not any(prompt.startswith(manual) for prompt in shipped)
            tokens = count(manual)
            lengths.append(tokens)
            if sizes is None:  # the tasks' own sizes: 1.0 to 1.9 blocks of 128 to 256
                assert 0.6 * min(build.BLOCKS) <= tokens <= 1.9 * max(build.BLOCKS)
            else:  # the stage's size, or the shortest manual of three needles
                assert tokens <= max(sizes[1], 95)
            answers = [t.strip() for t, w in spans if w == build.ANSWER_WEIGHT]
            assert 1 <= len(answers) <= build.QUESTIONS
            assert all(f"code is {code}." in manual for code in answers)
            # the manual's own codes are random digits: weight 0, every other text 1
            zero = [t for t, w in spans if w == 0.0]
            assert zero and all(len(t) == build.recall.CODE_DIGITS and t.isdigit() for t in zero)
            assert {w for _, w in spans} <= {0.0, 1.0, build.ANSWER_WEIGHT}
            notices += "Closing notice" in "".join(t for t, _ in spans)
        means.append(sum(lengths) / len(lengths))
    assert means[:3] == sorted(means[:3]) and means[-1] > 2 * means[0]  # short manuals first
    assert 0 < notices < 160  # both shapes: the multi-turn one and the cold-race one


def test_validation_items_are_of_the_tasks_sizes_and_answered_from_the_manual():
    build = _module()
    count = build.recall.Counter(build.TOKENIZER_FROM / "tokenizer.json")
    rng = random.Random("recall-validation-7")
    for notice in (False, True) * 10:
        prompt, answer = build.validation_item(count, rng, notice)
        assert prompt.rstrip().endswith("A:") and count(prompt) >= 100
        assert ("then the closing notice?" in prompt) is notice
        assert f"code is {answer.strip()}." in prompt
    assert set(build.STOP_AT) == {"recall", "notice"}


def test_the_curriculum_moves_through_the_stages_by_steps_or_by_seconds(monkeypatch):
    from tokenizers import Tokenizer

    build = _module()
    tokenizer = Tokenizer.from_file(str(build.TOKENIZER_FROM / "tokenizer.json"))
    stages = [[[(f"{i}", 1.0)]] for i in range(4)]
    by_steps = build.RecallSampler(tokenizer, stages, random.Random(0), eos=0, ramp_steps=6)
    seen = []
    for _ in range(9):
        seen.append(by_steps.stage())
        by_steps.batch(2, long=False)
    assert seen == [0, 0, 1, 1, 2, 2, 3, 3, 3]
    clock = [1000.0]
    monkeypatch.setattr(build.time, "time", lambda: clock[0])
    by_time = build.RecallSampler(tokenizer, stages, random.Random(0), eos=0, ramp_steps=10**6,
                                  ramp_seconds=30.0)
    seen = []
    for _ in range(5):
        seen.append(by_time.stage())
        clock[0] += 10.0
    assert seen == [0, 1, 2, 3, 3]
    # past the first stage, a REPLAY share of every batch comes from the earlier ones
    first, last = tokenizer.encode("0").ids, tokenizer.encode("3").ids
    assert len(first) == len(last) == 1 and first != last
    rows = [row[0] for row in by_time.batch(400, long=False)[0].tolist()]
    earlier = sum(token != last[0] for token in rows)
    assert 0.15 < earlier / 400 < 0.35 and first[0] in rows


def test_batches_pad_with_eos_at_weight_zero():
    from tokenizers import Tokenizer

    build = _module()
    tokenizer = Tokenizer.from_file(str(build.TOKENIZER_FROM / "tokenizer.json"))
    items = [[("Q: a?\nA:", 1.0), (" 1234", 5.0)], [("Q:\nA:", 1.0), (" 9", 5.0)]]
    sampler = build.RecallSampler(tokenizer, [items], random.Random(0), eos=0, ramp_steps=1)
    ids, weights = sampler.batch(8, long=False)
    assert ids.shape == weights.shape and ids.shape[0] == 8
    short = [row for row in range(8) if weights[row, -1] == 0]
    assert short and all(ids[row, -1] == 0 for row in short)
    assert set(weights.flatten().tolist()) <= {0.0, 1.0, 5.0}


def test_recall_is_graded_as_the_tasks_grade_it():
    build = _module()
    task = (REPO / "tasks" / "recall" / "recall_multiturn_b128.yaml").read_text(encoding="utf-8")
    assert "regex_pattern: (\\d{4})" in task  # the tasks' `code` filter
    assert build.first_code(" 6298. Closing notice: Visitors sign") == "6298"  # wave 1
    assert build.first_code(" 598157\nQ: g") == "5981"  # the first code-shaped number
    assert build.first_code(" 62\n") is None


def test_a_built_model_loads_back_with_the_weights_it_saved(tmp_path):
    import torch

    build = _module()
    sys.path.insert(0, str(REPO / "scripts" / "embedded"))
    import build_hybrid
    from hybrid_model import TinyHybridMTP, hybrid_config
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(build.TOKENIZER_FROM / "tokenizer.json"))
    torch.manual_seed(3)
    model = TinyHybridMTP(hybrid_config(tokenizer.get_vocab_size(),
                                        tokenizer.token_to_id("<|endoftext|>")))
    build_hybrid.save_hybrid(model, tmp_path)
    for name in build.TOKENIZER_FILES:
        (tmp_path / name).write_bytes((build.TOKENIZER_FROM / name).read_bytes())
    loaded, _ = build.load_built(tmp_path, "cpu")
    saved = model.checkpoint_state_dict()
    again = loaded.checkpoint_state_dict()
    assert saved.keys() == again.keys() and len(saved) > 50
    for key, tensor in saved.items():  # saved as bf16: equal after the same rounding
        assert torch.equal(tensor.to(torch.bfloat16), again[key].to(torch.bfloat16)), key
