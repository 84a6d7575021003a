"""Per-request seeds (evals.runner.sample_seeds), lm-eval's settings for chat and decoding
(evals.runner.prompt_settings) and each repeat scored alone (evals.runner.repeat_scores)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from evals.runner.prompt_settings import prompt_settings, sampling_record
from evals.runner.repeat_scores import merge_repeat_scores, score_repeats, write_repeat_scores
from evals.runner.sample_seeds import SampleSeeds, sample_seed


@dataclass
class Params:
    """The SamplingParams fields the seeding reads and writes."""

    temperature: float = 0.6
    prompt_logprobs: int | None = None
    seed: int | None = None

    def clone(self):
        return Params(self.temperature, self.prompt_logprobs, self.seed)


def _prompt(*ids):
    return {"prompt_token_ids": list(ids)}


def test_repeats_of_one_prompt_get_distinct_seeds_the_same_in_every_arm():
    seeded = []
    for _ in range(2):  # two arms
        seeds = SampleSeeds(1234)
        seeds.start_task()
        prompts = [_prompt(1, 2), _prompt(1, 2), _prompt(3), _prompt(1, 2)]
        shared = Params()  # one object for many requests: each gets its own copy
        out = seeds.seed(prompts, [shared] * 4)
        assert shared.seed is None and seeds.seeded == 4
        seeded.append([p.seed for p in out])
    assert seeded[0] == seeded[1]
    a0, a1, b0, a2 = seeded[0]
    assert len({a0, a1, a2}) == 3 and b0 not in (a0, a1, a2)
    assert a0 == sample_seed(1234, [1, 2], 0) and a2 == sample_seed(1234, [1, 2], 2)


def test_the_count_restarts_per_task_and_the_run_seed_changes_every_seed():
    seeds = SampleSeeds(1)
    first = seeds.seed([_prompt(5)], [Params()])[0].seed
    seeds.start_task()
    assert seeds.seed([_prompt(5)], [Params()])[0].seed == first
    assert SampleSeeds(2).seed([_prompt(5)], [Params()])[0].seed != first
    assert 0 <= first < 2 ** 62


def test_greedy_and_scoring_requests_are_left_alone():
    seeds = SampleSeeds(1)
    greedy, scoring = Params(temperature=0.0), Params(prompt_logprobs=1)
    out = seeds.seed([_prompt(1), _prompt(2)], [greedy, scoring])
    assert out == [greedy, scoring] and greedy.seed is None and seeds.seeded == 0


def test_prompt_settings_for_lm_eval():
    assert prompt_settings(None) == {}
    settings = prompt_settings({
        "chat": {"template": "{{x}}", "system": "Be brief.", "fewshot_as_multiturn": True},
        "decoding": {"temperature": 0.6, "max_tokens": 9}, "repeats": 8, "seed": 1})
    assert settings == {"apply_chat_template": True, "fewshot_as_multiturn": True,
                        "system_instruction": "Be brief.",
                        "gen_kwargs": {"temperature": 0.6, "do_sample": True, "max_gen_toks": 9}}
    plain = prompt_settings({"decoding": {}, "repeats": 3, "seed": 1})
    assert plain == {"fewshot_as_multiturn": False}


def test_the_record_names_the_template_file_and_hashes_its_text():
    record = sampling_record({"chat": {"template": "T", "template_path": "/c/t.jinja",
                                       "system": None, "fewshot_as_multiturn": False},
                              "decoding": {"temperature": 0.6}, "repeats": 2, "seed": 1})
    assert record["chat"]["template"] == "/c/t.jinja" and record["per_request_seeds"]
    assert len(record["chat"]["template_sha256"]) == 16 and record["repeats"] == 2
    unseeded = sampling_record({"decoding": {"temperature": 0.6, "seed_each_request": False},
                                "repeats": 2, "seed": 1})
    assert not unseeded["per_request_seeds"]
    assert prompt_settings({"decoding": {"temperature": 0.6, "seed_each_request": False},
                            "repeats": 1, "seed": 1})["gen_kwargs"] == {
        "temperature": 0.6, "do_sample": True}


@dataclass
class Instance:
    doc_id: int
    doc: dict
    resps: list


class Strip:
    def apply(self, resps, docs):
        return [r[0].strip() for r in resps]


@dataclass
class Ensemble:
    name: str
    filters: list = field(default_factory=lambda: [Strip])


class Task:
    """lm-eval's task surface that scoring uses: instances, filters, process_results."""

    def __init__(self):
        self.instances = [Instance(1, {"answer": "7"}, [" 7", " 8", "7 "]),
                          Instance(0, {"answer": "3"}, [" 3", " 3", " 4"])]
        self._filters = [Ensemble("strip")]

    def process_results(self, doc, results):
        return {"exact_match": float(results[0] == doc["answer"]), "note": "text"}


def test_each_repeat_is_scored_alone_by_the_tasks_own_filter_and_metric():
    scored = score_repeats(Task())
    assert scored["repeats"] == 3 and scored["filters"] == ["strip"]
    first, second = scored["items"]
    assert first["doc_id"] == 0 and first["scores"] == {"strip": {"exact_match": [1, 1, 0]}}
    assert second["scores"]["strip"]["exact_match"] == [1, 0, 1]
    assert second["responses"] == [" 7", " 8", "7 "]
    assert second["answers"] == {"strip": ["7", "8", "7"]}


def test_a_subset_of_items_is_written_under_its_indices_in_the_task():
    # lm-eval numbers the instances of a `samples` run 0, 1, ... and logs doc_id
    # indices[doc_id]; the repeat scores must use the same ids to pair with the samples
    scored = score_repeats(Task(), indices=[5, 9])
    assert [item["doc_id"] for item in scored["items"]] == [5, 9]
    assert scored["items"][1]["responses"] == [" 7", " 8", "7 "]


def test_a_wave_tasks_parts_merge_into_one_file_and_overlaps_are_refused(tmp_path):
    parts = [tmp_path / "w1.json", tmp_path / "w2.json"]
    write_repeat_scores(parts[0], "recall", Task(), indices=[4, 2])
    write_repeat_scores(parts[1], "recall", Task(), indices=[7, 8])
    assert merge_repeat_scores(parts, tmp_path / "all.json") == 4
    merged = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    assert [i["doc_id"] for i in merged["items"]] == [2, 4, 7, 8]
    assert merged["repeats"] == 3 and merged["task"] == "recall"
    write_repeat_scores(parts[1], "recall", Task(), indices=[4, 8])
    with pytest.raises(ValueError, match="doc_id 4 is in an earlier part"):
        merge_repeat_scores(parts, tmp_path / "all.json")
    write_repeat_scores(parts[1], "other", Task(), indices=[7, 8])
    with pytest.raises(ValueError, match="task 'other' differs"):
        merge_repeat_scores(parts, tmp_path / "all.json")
