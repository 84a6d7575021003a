"""The needle-recall tasks (tasks/recall): rebuilt byte for byte from their seed, their
prompts sized for the trigger geometry they are named after, and their waves grouped as
the runner sends them (evals.runner.waves)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from evals.runner.waves import (fresh_waves, group_waves, indexed_without_waves, mark_fresh,
                                wave_field)

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "tasks" / "recall"


def _builder():
    spec = importlib.util.spec_from_file_location(
        "build_recall_tasks", REPO / "scripts" / "build_recall_tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _metadata(path: Path) -> dict:
    class IgnoreTags(yaml.SafeLoader):
        pass

    IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=IgnoreTags)["metadata"]


def _rows(data: str) -> list[dict]:
    lines = (SHIPPED / "data" / f"{data}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_rebuild_is_byte_identical_to_the_shipped_files(tmp_path):
    written = _builder().write([128, 192, 256], 2026, tmp_path, echo=lambda _line: None)
    shipped = sorted(p.relative_to(SHIPPED) for p in SHIPPED.rglob("*") if p.is_file()
                     and "__pycache__" not in p.parts)
    rebuilt = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert rebuilt == shipped
    for path in rebuilt:
        assert (tmp_path / path).read_bytes() == (SHIPPED / path).read_bytes(), path
    assert len(written) == 8


def test_another_seed_writes_other_codes(tmp_path):
    _builder().write([128], 7, tmp_path, echo=lambda _line: None)
    other = (tmp_path / "data" / "cold_race_b128.jsonl").read_text(encoding="utf-8")
    assert other != (SHIPPED / "data" / "cold_race_b128.jsonl").read_text(encoding="utf-8")


@pytest.mark.parametrize("block", [128, 192, 256])
def test_cold_race_wave_one_lies_between_one_and_two_blocks_and_wave_two_past_two(block):
    # wave 2 past two blocks, sharing two: under MTP vLLM 0.26 hits no prompt of at most
    # 2 B tokens (docs/recall.md, "Why the cold race found no cache hit")
    meta = _metadata(SHIPPED / f"recall_cold_race_b{block}.yaml")
    trigger = meta["trigger"]
    assert trigger["block_tokens"] == block and meta["waves"] == "wave"
    low, high = trigger["prompt_tokens"]
    assert 1.05 * block < low <= high < 1.95 * block
    low2, high2 = trigger["wave2_prompt_tokens"]
    assert 2.05 * block < low2 <= high2 < 2.95 * block
    assert 2 * block <= trigger["wave2_shared_tokens"] < low2
    rows = _rows(meta["data"])
    wave1 = [r["prompt"] for r in rows if r["wave"] == 1]
    assert len(wave1) == trigger["wave1_prompts"] == 16 and len(set(wave1)) == 1
    wave2 = [r for r in rows if r["wave"] == 2]
    # wave 2 resumes from the manual wave 1 cached, every vault asked
    manual = wave1[0][:wave1[0].rindex("Q:")]
    assert all(r["prompt"].startswith(manual) for r in wave2)
    shared = wave2[0]["prompt"][:wave2[0]["prompt"].rindex("Q:")]
    assert all(r["prompt"].startswith(shared) for r in wave2) and len(shared) > len(manual)
    assert {r["vault"] for r in wave2} == set(range(trigger["needles"]))
    assert all(f"code is {r['code']}." in manual for r in wave2)


@pytest.mark.parametrize("block", [128, 192, 256])
def test_multi_turn_wave_one_ends_below_the_second_boundary_and_decode_crosses_it(block):
    meta = _metadata(SHIPPED / f"recall_multiturn_b{block}.yaml")
    trigger = meta["trigger"]
    low, high = trigger["prompt_tokens"]
    assert block < low <= high < 2 * block
    assert high + trigger["min_tokens"] > 2 * block
    rows = _rows(meta["data"])
    first = {r["conversation_id"]: r for r in rows if r["wave"] == 1}
    second = [r for r in rows if r["wave"] == 2]
    assert len(first) == len(second) == 32
    # wave 2 re-sends its conversation's wave-1 prompt and reply, then asks another vault
    for row in second:
        head = first[row["conversation_id"]]
        assert row["prompt"].startswith(head["prompt"] + f" {head['code']}. Closing notice:")


def test_waves_group_items_in_ascending_wave_order_and_limit_applies_per_wave():
    docs = [{"wave": 2}, {"wave": 1}, {"wave": 2}, {"wave": 1}, {"wave": 1}]
    assert group_waves(docs, "wave") == [[1, 3, 4], [0, 2]]
    assert group_waves(docs, "wave", limit=1) == [[1], [0]]
    with pytest.raises(ValueError, match="item 0 has no field `turn`"):
        group_waves(docs, "turn", task="t")


def test_the_task_index_tells_plain_tasks_apart_without_loading_them():
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=[str(REPO / "tasks")], include_defaults=False)
    assert indexed_without_waves(manager, "tiny_addition")
    assert not indexed_without_waves(manager, "recall_cold_race_b128")
    assert not indexed_without_waves(manager, "no_such_task")  # unknown: load and look


def test_the_wave_field_comes_from_the_task_metadata():
    class Config:
        metadata = {"waves": "wave", "version": 1.0}

    class Task:
        config = Config()

    assert wave_field(Task()) == "wave"
    Config.metadata = {"version": 1.0}
    assert wave_field(Task()) is None


def test_the_many_manual_cold_race_repeats_the_one_manual_race_per_manual():
    meta = _metadata(SHIPPED / "recall_cold_race_many_b128.yaml")
    one = _metadata(SHIPPED / "recall_cold_race_b128.yaml")["trigger"]
    trigger = meta["trigger"]
    manuals = trigger["manuals"]
    assert manuals == 16 and meta["waves"] == "wave"
    # every manual meets the race as the one-manual task's does: same lengths and sharing
    assert {k: trigger[k] for k in one} == one
    rows = _rows(meta["data"])
    assert len(rows) == manuals * (16 + 12)
    # manual m: cold wave 2m + 1 (fresh but the first), question wave 2m + 2
    assert meta["fresh_waves"] == [2 * m + 1 for m in range(1, manuals)]
    assert sorted({r["wave"] for r in rows}) == list(range(1, 2 * manuals + 1))
    manual0 = [{k: r[k] for k in ("wave", "vault", "prompt", "code")} for r in rows
               if r["manual"] == 0]
    assert manual0 == _rows("cold_race_b128")  # manual 0 is the one-manual task
    colds = {}
    for m in range(manuals):
        cold = {r["prompt"] for r in rows if r["manual"] == m and r["wave"] == 2 * m + 1}
        questions = [r for r in rows if r["manual"] == m and r["wave"] == 2 * m + 2]
        (colds[m],) = cold  # identical prompts
        manual = colds[m][:colds[m].rindex("Q:")]
        assert len(questions) == 12 and all(q["prompt"].startswith(manual) for q in questions)
        assert all(f"code is {q['code']}." in manual for q in questions)
        # a cluster per manual's cold prompts and per vault's phrasings
        assert {r["group"] for r in rows if r["manual"] == m} == {
            f"m{m:02d}-cold", f"m{m:02d}-v00", f"m{m:02d}-v01", f"m{m:02d}-v02"}
    # other manuals, other codes: no two share their first block's text
    assert len({c[:200] for c in colds.values()}) == manuals


def test_the_many_manual_multi_turn_has_no_two_conversations_alike():
    meta = _metadata(SHIPPED / "recall_multiturn_many_b128.yaml")
    one = _metadata(SHIPPED / "recall_multiturn_b128.yaml")["trigger"]
    trigger = meta["trigger"]
    for key in ("block_tokens", "prompt_tokens", "wave2_prompt_tokens", "min_tokens"):
        assert trigger[key] == one[key], key
    rows = _rows(meta["data"])
    first = [r for r in rows if r["wave"] == 1]
    second = [r for r in rows if r["wave"] == 2]
    assert len(first) == len(second) == trigger["wave1_prompts"] == 16 * 4
    assert len({r["prompt"] for r in first}) == len(first)
    assert len({r["prompt"] for r in second}) == len(second)
    by_id = {r["conversation_id"]: r for r in first}
    for row in second:
        head = by_id[row["conversation_id"]]
        assert row["prompt"].startswith(head["prompt"] + f" {head['code']}. Closing notice:")
    assert "fresh_waves" not in meta


def test_fresh_waves_come_from_the_metadata_in_the_order_of_the_waves():
    class Config:
        metadata = {"waves": "wave", "fresh_waves": [3]}

    class Task:
        config = Config()

    docs = [{"wave": 4}, {"wave": 3}, {"wave": 1}, {"wave": 2}]
    assert fresh_waves(Task()) == {3}
    assert mark_fresh(group_waves(docs, "wave"), docs, "wave", fresh_waves(Task())) \
        == [([2], False), ([3], False), ([1], True), ([0], False)]
    Config.metadata = {"waves": "wave"}
    assert fresh_waves(Task()) == set()
