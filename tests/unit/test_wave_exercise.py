"""A task run in waves whose later wave never hit the prefix cache is named in the exercise
warnings (evals.analyse.exercise.unresumed_waves)."""

from __future__ import annotations

from evals.analyse.exercise import assess, unresumed_waves
from evals.plan.optimizations import PREFIX_CACHING


def _record(wave2_hits: float) -> dict:
    waves = [{"wave": 1, "items": 16, "exercise": {"vllm:prefix_cache_hits": 384.0}},
             {"wave": 2, "items": 12, "exercise": {"vllm:prefix_cache_hits": wave2_hits}}]
    return {"exercise": {"vllm:prefix_cache_queries": 1000.0,
                         "vllm:prefix_cache_hits": 384.0 + wave2_hits}, "waves": waves}


def test_a_wave_without_hits_is_named_and_a_resumed_one_is_not():
    records = {"recall_cold_race_b128": _record(0.0), "recall_multiturn_b128": _record(512.0)}
    assert unresumed_waves(records, {}) == [
        "task recall_cold_race_b128: wave 2 got no prefix-cache hits on the candidate, so it "
        "did not resume from the earlier wave's cache"]
    assert unresumed_waves(records, {"recall_cold_race_b128": False}) == []


def test_assess_warns_only_where_prefix_caching_is_declared():
    manifests = {"baseline": {"tasks": {}},
                 "candidate": {"tasks": {"recall_cold_race_b128": _record(0.0)}}}
    warned = assess((PREFIX_CACHING,), manifests, {}).warnings
    assert any("wave 2 got no prefix-cache hits" in w for w in warned)
    assert not any("wave 2" in w for w in assess((), manifests, {}).warnings)


def test_a_fresh_wave_without_hits_is_not_named_but_a_later_question_wave_is():
    # the many-manual cold race: wave 3 is the next manual's cold start (no earlier wave
    # shares its prefix), wave 4 its questions, which must resume from wave 3's cache
    record = _record(256.0)
    record["waves"] += [
        {"wave": 3, "items": 16, "exercise": {"vllm:prefix_cache_hits": 0.0}, "fresh": True},
        {"wave": 4, "items": 12, "exercise": {"vllm:prefix_cache_hits": 0.0}}]
    assert unresumed_waves({"recall_cold_race_many_b128": record}, {}) == [
        "task recall_cold_race_many_b128: wave 4 got no prefix-cache hits on the candidate, "
        "so it did not resume from the earlier wave's cache"]
    del record["waves"][2]["fresh"]
    assert len(unresumed_waves({"recall_cold_race_many_b128": record}, {})) == 2
