"""Config audit on synthetic effective configs: undeclared differences stop the run, declared
ones and vLLM's known consequences of them pass, and an override is recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.preflight.audit import OVERRIDE_FLAG, audit_arms
from evals.plan.config import parse_config
from evals.errors import UserError

ENGINE_ARGS = ("dtype", "max_model_len", "max_num_seqs", "enable_prefix_caching",
               "speculative_config", "kv_cache_dtype", "max_num_scheduled_tokens",
               "kv_cache_memory_bytes", "async_scheduling", "model", "tokenizer")
SPEC = {"method": "mtp", "num_speculative_tokens": 1}
BASE_EFFECTIVE = {
    "cache.cache_dtype": "auto",
    "cache.enable_prefix_caching": False,
    "cache.kv_cache_memory_bytes": 2 * 2**30,
    "model.dtype": "bfloat16",
    "model.model": "/m",
    "model.max_model_len": 1024,
    "scheduler.async_scheduling": False,
    "scheduler.encoder_cache_size": 4096,
    "scheduler.max_num_scheduled_tokens": None,
    "scheduler.max_num_seqs": 256,
    "speculative": None,
}


def config(baseline: dict, candidate: dict, intended=None, source="configs/x.yaml"):
    data = {"name": "t", "model": "/m", "tasks": ["tiny_reviews_gen"],
            "arms": {"baseline": baseline, "candidate": candidate}}
    if intended is not None:
        data["intended_change"] = intended
    return parse_config(data, Path(source))


def effective(**changes) -> dict:
    out = dict(BASE_EFFECTIVE)
    for key, value in changes.items():
        out[key.replace("__", ".")] = value
    return out


def with_speculation(out: dict) -> dict:
    out = dict(out)
    del out["speculative"]
    out.update({"speculative.method": "mtp", "speculative.num_speculative_tokens": 1,
                "speculative.max_model_len": None})
    out["scheduler.max_num_scheduled_tokens"] = 4096
    return out


def audit(cfg, base: dict | None, cand: dict | None, **kwargs):
    return audit_arms(cfg, {"baseline": base, "candidate": cand},
                      engine_arg_names=ENGINE_ARGS, **kwargs)


MTP_BASE = {"engine": {"enable_prefix_caching": False}}
MTP_CAND = {"engine": {"enable_prefix_caching": True, "speculative_config": SPEC}}
MTP_CAND_EFFECTIVE = with_speculation(effective(cache__enable_prefix_caching=True))


def test_declared_change_and_its_known_consequences_pass():
    cfg = config(MTP_BASE, MTP_CAND, ["speculative_config", "enable_prefix_caching"])
    result = audit(cfg, effective(), MTP_CAND_EFFECTIVE)
    assert not result.stops and result.undeclared == () and result.resolved
    result.check()
    status = {d.field: d.status for d in result.effective}
    assert status == {"cache.enable_prefix_caching": "declared",
                      "scheduler.max_num_scheduled_tokens": "follows speculative_config",
                      "speculative": "declared"}
    (spec_row,) = [d for d in result.effective if d.field == "speculative"]
    assert spec_row.baseline is None and spec_row.candidate["method"] == "mtp"  # one row
    assert {d.field: d.status for d in result.requested} == {
        "engine.enable_prefix_caching": "declared", "engine.speculative_config": "declared"}


def test_undeclared_engine_argument_difference_stops():
    cand = {"engine": {**MTP_CAND["engine"], "max_num_seqs": 64}}
    cfg = config(MTP_BASE, cand, ["speculative_config", "enable_prefix_caching"])
    cand_eff = dict(MTP_CAND_EFFECTIVE, **{"scheduler.max_num_seqs": 64})
    result = audit(cfg, effective(), cand_eff)
    assert result.stops
    (undeclared,) = result.undeclared
    assert undeclared.name == "max_num_seqs" and undeclared.fields == ("engine.max_num_seqs",)
    message = result.stop_message()
    assert message.startswith("configs/x.yaml: ")
    assert "max_num_seqs" in message and OVERRIDE_FLAG in message and "intended_change" in message
    assert {d.field: d.status for d in result.effective}["scheduler.max_num_seqs"] == "NOT DECLARED"
    with pytest.raises(UserError, match="max_num_seqs"):
        result.check()


def test_declaring_the_extra_difference_passes():
    cand = {"engine": {**MTP_CAND["engine"], "max_num_seqs": 64}}
    cfg = config(MTP_BASE, cand, ["speculative_config", "enable_prefix_caching", "max_num_seqs"])
    result = audit(cfg, effective(), dict(MTP_CAND_EFFECTIVE, **{"scheduler.max_num_seqs": 64}))
    assert not result.stops and result.undeclared == ()


@pytest.mark.parametrize("intended", [None, ["speculative_config"]])
def test_side_effect_on_an_engine_argument_field_stops(intended):
    # the candidate only switches speculation on, yet prefix caching comes out different:
    # the "disable MTP silently disabled prefix caching" case, with or without intended_change
    cfg = config({"engine": {}}, {"engine": {"speculative_config": SPEC}}, intended)
    cand_eff = with_speculation(effective(cache__enable_prefix_caching=True))
    result = audit(cfg, effective(), cand_eff)
    assert result.stops
    (undeclared,) = result.undeclared
    assert undeclared.name == "enable_prefix_caching"
    assert undeclared.fields == ("cache.enable_prefix_caching",)
    assert "although the arms do not set enable_prefix_caching differently" in undeclared.reason
    assert "enable_prefix_caching" in result.stop_message()


def test_fields_that_are_not_engine_arguments_are_shown_but_do_not_stop():
    cfg = config({"engine": {}}, {"engine": {}}, None)
    result = audit(cfg, effective(), effective(scheduler__encoder_cache_size=8192))
    assert not result.stops
    assert [(d.field, d.status) for d in result.effective] == [("scheduler.encoder_cache_size", "")]


def test_override_is_recorded():
    cand = {"engine": {**MTP_CAND["engine"], "max_num_seqs": 64}}
    cfg = config(MTP_BASE, cand, ["speculative_config", "enable_prefix_caching"])
    result = audit(cfg, effective(), MTP_CAND_EFFECTIVE, allow_undeclared=True)
    assert not result.stops and result.undeclared
    result.check()
    data = json.loads(json.dumps(result.to_dict()))
    assert data["allow_undeclared"] is True and data["stopped"] is False
    assert [u["name"] for u in data["undeclared"]] == ["max_num_seqs"]
    assert OVERRIDE_FLAG in result.message()
    assert any(OVERRIDE_FLAG in line and "max_num_seqs" in line for line in result.warning_lines())
    assert audit(cfg, effective(), MTP_CAND_EFFECTIVE).with_override().to_dict() == result.to_dict()


def test_unknown_intended_change_name_stops_even_with_the_override():
    cfg = config(MTP_BASE, MTP_CAND, ["speculative_config", "enable_prefix_cache"])
    result = audit(cfg, effective(), MTP_CAND_EFFECTIVE, allow_undeclared=True)
    assert result.stops and result.unknown_declared == ("enable_prefix_cache",)
    assert "`enable_prefix_cache`, which is not a vLLM engine argument" in result.stop_message()


def test_unresolved_arm_falls_back_to_engine_arguments():
    cand = {"engine": {**MTP_CAND["engine"], "max_num_seqs": 64}}
    cfg = config(MTP_BASE, cand, ["speculative_config", "enable_prefix_caching"])
    result = audit(cfg, effective(), None, errors={"candidate": "ValueError: needs a GPU"})
    assert not result.resolved and result.effective == ()
    assert [u.name for u in result.undeclared] == ["max_num_seqs"]
    assert any("arm candidate could not be resolved (ValueError: needs a GPU)" in n
               for n in result.notes)
    assert "effective differences" not in result.message()


def test_model_and_env_are_pseudo_arguments():
    cfg = config({"env": {"VLLM_CPU_KVCACHE_SPACE": "2"}},
                 {"model": "/q", "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}}, ["model"])
    cand_eff = effective(model__model="/q", cache__kv_cache_memory_bytes=4 * 2**30)
    result = audit(cfg, effective(), cand_eff)
    assert [u.name for u in result.undeclared] == ["env"]
    assert result.undeclared[0].fields == ("env.VLLM_CPU_KVCACHE_SPACE",)
    status = {d.field: d.status for d in result.effective}
    assert status == {"model.model": "declared", "cache.kv_cache_memory_bytes": "NOT DECLARED"}
    ok = audit(config(cfg.arms.baseline.model_dump(), cfg.arms.candidate.model_dump(),
                      ["model", "env"]), effective(), cand_eff)
    assert not ok.stops
    assert {d.field: d.status for d in ok.effective}["cache.kv_cache_memory_bytes"] == "follows env"


def test_requested_difference_vllm_ignores_is_noted():
    cfg = config({"engine": {}}, {"engine": {"async_scheduling": True}}, ["async_scheduling"])
    result = audit(cfg, effective(), effective())
    assert not result.stops and result.effective == ()
    assert any("engine.async_scheduling differently, but vLLM resolves scheduler.async_scheduling"
               in note for note in result.notes)


def test_declared_but_unchanged_and_identical_arms():
    cfg = config({"engine": {"dtype": "bfloat16"}}, {"engine": {"dtype": "bfloat16"}},
                 ["kv_cache_dtype"])
    result = audit(cfg, effective(), effective())
    assert not result.stops
    assert "`intended_change` lists kv_cache_dtype, but the arms do not differ in it" in result.notes
    aa = audit(config({}, {}, []), effective(), effective())
    assert not aa.stops and aa.requested == () and aa.effective == () and aa.notes == ()


def test_vllm_warnings_of_one_arm_become_notes():
    cfg = config(MTP_BASE, MTP_CAND, ["speculative_config", "enable_prefix_caching"])
    result = audit(cfg, effective(), MTP_CAND_EFFECTIVE,
                   vllm_warnings={"baseline": ["common"], "candidate": ["common", "spec says hi"]})
    assert result.notes == ("vLLM warned for the candidate only: spec says hi",)


def test_message_is_a_readable_table():
    cand = {"engine": {**MTP_CAND["engine"], "max_num_seqs": 64}}
    cfg = config(MTP_BASE, cand, ["speculative_config", "enable_prefix_caching"])
    text = audit(cfg, effective(), MTP_CAND_EFFECTIVE, seconds={"baseline": 8.0}).message()
    lines = text.splitlines()
    assert lines[0] == ("config audit of configs/x.yaml (intended change: speculative_config, "
                        "enable_prefix_caching)")
    assert any(line.split()[:4] == ["engine.max_num_seqs", "<not", "set>", "64"] for line in lines)
    assert lines[-1].startswith("STOP: configs/x.yaml: the arms differ")


def test_mode_is_a_pseudo_argument_and_explains_batch_defaults():
    cand_eff = effective(scheduler__max_num_seqs=128)  # `vllm serve` defaults, not vllm.LLM's
    declared = audit(config({}, {"mode": "server"}, ["mode"]), effective(), cand_eff)
    assert not declared.stops
    assert [(d.field, d.status) for d in declared.effective] == [("scheduler.max_num_seqs",
                                                                  "follows mode")]
    undeclared = audit(config({}, {"mode": "server"}, []), effective(), cand_eff)
    assert [u.name for u in undeclared.undeclared] == ["mode"]


def test_endpoint_arms_are_not_resolved_and_start_no_process():
    from evals.plan.arm_spec import ArmSpec
    from evals.runner.config_resolver import resolve_arms

    spec = ArmSpec(arm="baseline", model="m", engine={}, env={}, tasks=(), limit=None,
                   num_fewshot=None, seed=1, include_paths=(), output_dir="", versions={},
                   mode="endpoint")
    resolved = resolve_arms({"baseline": spec, "candidate": spec})
    assert all(r.effective is None and "`endpoint` arm has no vLLM engine config" in r.error
               for r in resolved.values())
