"""Exercise evidence from vLLM's counters: what counts as engaged, and the "not exercised"
gate. The counter records are the runner's task records; their shape is the one vLLM
reports (`vllm:prefix_cache_hits` etc., recorded from a real run in
tests/engine/test_canary.py)."""

from __future__ import annotations

from evals.analyse.exercise import assess
from evals.plan.optimizations import FP8_KV_CACHE, PREFIX_CACHING, SPEC_DECODE, declared_optimizations
from evals.decide.verdict import RunVerdict, Verdict, apply_exercise_gate

MTP = {"method": "mtp", "num_speculative_tokens": 1}


def _record(queries=0.0, hits=0.0, drafts=0.0, accepted=0.0, preemptions=0.0) -> dict:
    return {"exercise": {"vllm:prefix_cache_queries": queries, "vllm:prefix_cache_hits": hits,
                         "vllm:spec_decode_num_draft_tokens": drafts,
                         "vllm:spec_decode_num_accepted_tokens": accepted,
                         "vllm:num_preemptions": preemptions}}


def _verdict(v: Verdict) -> RunVerdict:
    return RunVerdict(v, (), 0.05, 0.02, "holm", "every gated task is non-inferior")


def test_declared_optimizations_are_what_the_candidate_adds():
    base = {"enable_prefix_caching": False}
    cand = {"enable_prefix_caching": True, "speculative_config": MTP, "kv_cache_dtype": "fp8"}
    assert declared_optimizations(base, cand) == (PREFIX_CACHING, SPEC_DECODE, FP8_KV_CACHE)
    # both arms with prefix caching on: the comparison does not test it
    assert declared_optimizations({"enable_prefix_caching": True},
                                  {"enable_prefix_caching": True}) == ()
    assert declared_optimizations({}, {"kv_cache_dtype": "auto"}) == ()


def test_shares_and_acceptance_per_task():
    report = assess((PREFIX_CACHING, SPEC_DECODE),
                    {"candidate": {"tasks": {"a": _record(400, 300, 50, 45)}}}, {"a": True})
    (row,) = report.rows
    assert row.cached_share == 0.75 and row.acceptance == 0.9
    assert report.not_exercised == () and report.warnings == ()
    data = report.to_dict()
    assert data["tasks"][0]["cached_share"] == 0.75 and data["declared"] == [PREFIX_CACHING,
                                                                              SPEC_DECODE]


def test_never_engaged_on_any_gated_task_is_not_exercised():
    manifests = {"candidate": {"tasks": {"short": _record(400, 0, 50, 45),
                                         "other": _record(300, 0, 20, 20),
                                         "ungated": _record(900, 640, 0, 0)}}}
    report = assess((PREFIX_CACHING, SPEC_DECODE), manifests,
                    {"short": True, "other": True, "ungated": False})
    # hits on a task that does not gate do not count
    assert report.not_exercised == (PREFIX_CACHING,)
    assert "0 cached prompt tokens on every gated task (short, other)" in report.warnings[0]
    gated = apply_exercise_gate(_verdict(Verdict.PASS), report)
    assert gated.verdict is Verdict.INCONCLUSIVE and gated.exit_code == 3
    assert gated.reason.startswith("not exercised: prefix caching")
    # a real regression stays a regression
    assert apply_exercise_gate(_verdict(Verdict.REGRESSION), report).verdict is Verdict.REGRESSION


def test_idle_on_some_tasks_is_a_warning_naming_task_and_optimization():
    manifests = {"candidate": {"tasks": {"long": _record(400, 256), "short": _record(40, 0)}}}
    report = assess((PREFIX_CACHING,), manifests, {"long": True, "short": True})
    assert report.not_exercised == ()
    assert report.warnings == ("task short: prefix caching did not engage on the candidate "
                               "(0 cached prompt tokens)",)
    assert apply_exercise_gate(_verdict(Verdict.PASS), report).verdict is Verdict.PASS


def test_fp8_kv_cache_checked_against_the_effective_config():
    used = {"candidate": {"effective_engine_config": {"cache_config.cache_dtype": "fp8"},
                          "tasks": {"a": _record()}}}
    assert assess((FP8_KV_CACHE,), used, {"a": True}).not_exercised == ()
    ignored = {"candidate": {"effective_engine_config": {"cache_config.cache_dtype": "auto"},
                             "tasks": {"a": _record()}}}
    assert assess((FP8_KV_CACHE,), ignored, {"a": True}).not_exercised == (FP8_KV_CACHE,)


def test_no_counters_is_unknown_not_a_failure():
    report = assess((PREFIX_CACHING,), {"candidate": {"tasks": {"a": {}}}}, {"a": True})
    assert report.not_exercised == () and "unknown" in report.warnings[0]
    assert report.rows[0].cached_share is None
