"""One assembly of an arm's vLLM call (evals.runner.engine_call): what lm-eval's `vllm`
backend really hands vLLM's `LLM` (lm-eval itself, with `LLM` replaced by a recorder) is
what the config audit resolves, LoRA settings included; and an adapter makes two arms
different measurements wherever "the same measurement" is decided."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.plan.arm_spec import ArmSpec
from evals.preflight.checks import arm_identity
from evals.runner.config_resolver import resolver_input
from evals.runner.engine_call import LORA_NAME, offline_call, offline_engine_args, server_call

REPO = Path(__file__).resolve().parents[2]
MODEL = str(REPO / "models" / "tiny-reviews")
ENGINE = {"dtype": "bfloat16", "max_model_len": 512, "enable_prefix_caching": True}


def spec(**fields) -> ArmSpec:
    base = dict(arm="candidate", model=MODEL, engine=dict(ENGINE), env={}, tasks=(),
                limit=None, num_fewshot=None, seed=1234, include_paths=(), output_dir="",
                versions={})
    return ArmSpec(**{**base, **fields})


class Recorded(Exception):
    pass


def what_lm_eval_hands_vllm(arm: ArmSpec, monkeypatch) -> dict:
    """lm-eval's VLLM(...) built as the worker builds it, stopped at its `LLM(**kwargs)`."""
    from lm_eval.models import vllm_causallms

    seen = {}

    def llm(**kwargs):
        seen.update(kwargs)
        raise Recorded

    monkeypatch.setattr(vllm_causallms, "LLM", llm)
    with pytest.raises(Recorded):
        vllm_causallms.VLLM(pretrained=arm.model, seed=arm.seed, batch_size="auto",
                            **offline_call(arm))
    return seen


@pytest.mark.parametrize("fields", [
    {},
    {"lora_adapter": "/adapters/a"},
    {"lora_adapter": "/adapters/a", "engine": {**ENGINE, "max_lora_rank": 8}},
    {"engine": {**ENGINE, "max_lora_rank": 32}, "seed": 7},
], ids=["plain", "adapter", "adapter-rank-8", "rank-without-adapter"])
def test_the_audited_engine_arguments_are_what_lm_eval_hands_vllm(fields, monkeypatch):
    arm = spec(**fields)
    handed = what_lm_eval_hands_vllm(arm, monkeypatch)
    audited = offline_engine_args(arm)
    assert handed.pop("model") == arm.model
    for key, value in audited.items():
        assert handed[key] == value, key
    # what lm-eval adds beyond those is lm-eval's own default for a vLLM default (None,
    # "auto"), not a setting that could make the run differ from the audit
    extra = {k: v for k, v in handed.items() if k not in audited}
    assert set(extra) <= {"revision", "dtype", "tokenizer", "tokenizer_mode",
                          "tokenizer_revision", "trust_remote_code", "tensor_parallel_size",
                          "max_model_len", "max_num_seqs", "quantization"}, extra
    assert handed["enable_lora"] is bool(arm.lora_adapter)


def test_the_resolver_gets_the_adapter_of_offline_and_server_arms():
    offline = resolver_input(spec(lora_adapter="/adapters/a"))
    assert offline["engine"]["enable_lora"] is True
    assert offline["engine"]["max_lora_rank"] == 16  # lm-eval's default
    assert "lora_local_path" not in offline["engine"]  # lm-eval's name, not vLLM's
    served = resolver_input(spec(lora_adapter="/adapters/a", mode="server"))
    assert served["engine"]["lora_modules"] == f"{LORA_NAME}=/adapters/a"
    assert served["engine"]["enable_lora"] is True
    assert server_call(spec(mode="server")) == (ENGINE, None)
    assert resolver_input(spec())["engine"]["enable_lora"] is False


def test_the_audited_offline_arguments_build_vllms_engine_args():
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(model=MODEL, **offline_engine_args(spec(lora_adapter="/adapters/a")))
    assert args.enable_lora is True and args.max_lora_rank == 16 and args.seed == 1234


def test_an_adapter_makes_arms_that_vllm_resolves_alike_different_measurements():
    effective = {"cache.enable_prefix_caching": True, "model.dtype": "bfloat16"}
    plain = spec(arm="baseline")
    adapted = spec(lora_adapter="/adapters/a", adapter_hash="a" * 16)
    assert arm_identity(plain, effective) != arm_identity(adapted, effective)
    # arms that differ only in engine arguments vLLM resolves alike are one measurement
    other_engine = spec(engine={**ENGINE, "enable_prefix_caching": None})
    assert arm_identity(plain, effective) == arm_identity(other_engine, effective)
    assert arm_identity(plain) != arm_identity(other_engine)


class _Passing:
    def message(self):
        return "ok"

    def check(self):
        return None

    def to_dict(self):
        return {}

    def warning_lines(self):
        return []


def test_a_study_stops_arms_vllm_resolves_alike_unless_an_adapter_differs(monkeypatch):
    from evals.dispatch import config_audit as study_run
    from evals.errors import UserError
    from evals.plan.study import load_run_config
    from evals.runner.config_resolver import ResolvedArm

    study = load_run_config(REPO / "configs" / "cpu" / "study_mtp_prefix.yaml")
    effective = {"cache.enable_prefix_caching": True}
    monkeypatch.setattr(study_run, "resolved_or_recorded", lambda specs: {
        arm: ResolvedArm(arm, dict(effective), None, (), (), 0.0) for arm in specs})
    monkeypatch.setattr(study_run, "audit_resolved", lambda *a, **k: _Passing())
    alike = {arm: spec(arm=arm) for arm in study.arms}
    with pytest.raises(UserError, match="to the same effective engine config"):
        study_run.study_audit(study, alike, allow_undeclared=False, echo=lambda line: None)
    adapted = {arm: spec(arm=arm, lora_adapter=f"/adapters/{k}", adapter_hash=str(k) * 16)
               for k, arm in enumerate(study.arms)}
    study_run.study_audit(study, adapted, allow_undeclared=False, echo=lambda line: None)


def _two_arms(tmp_path, candidate: dict):
    import json

    from evals.plan.config import load_config
    from evals.dispatch.arms import arm_specs

    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({
        "name": "c", "model": "m", "tasks": [{"name": "tiny_addition"}],
        "arms": {"baseline": {"engine": {"max_num_seqs": 8}},
                 "candidate": {"engine": {"max_num_seqs": 16}, **candidate}}}),
        encoding="utf-8")
    config = load_config(path)
    return config, arm_specs(config, tmp_path / "run")


def test_a_swallowed_engine_difference_stops_unless_another_part_of_the_arm_differs(tmp_path):
    """vLLM resolving both arms alike tests nothing - unless the arms also differ in
    something the engine config does not show (here a LoRA adapter): one arm identity
    (evals.preflight.checks.arm_identity) decides before the run and after it."""
    import pytest

    from evals.errors import UserError
    from evals.dispatch.config_audit import check_effective_configs

    same = {"baseline": {"effective_engine_config": {"x": 1}},
            "candidate": {"effective_engine_config": {"x": 1}}}
    config, specs = _two_arms(tmp_path, {})
    with pytest.raises(UserError, match="identical effective configs"):
        check_effective_configs(config, same, specs)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    config, specs = _two_arms(tmp_path, {"lora_adapter": str(adapter)})
    check_effective_configs(config, same, specs)  # the adapter is the difference
    differ = {**same, "candidate": {"effective_engine_config": {"x": 2}}}
    config, specs = _two_arms(tmp_path, {})
    check_effective_configs(config, differ, specs)


def _resolve_from_the_call(specs, **_):
    """A stand-in for the resolver processes (evals.runner.config_resolver.resolve_arms):
    each arm's "effective config" is the engine arguments of its vLLM call as the resolver
    receives them (`resolver_input`, the one assembly of engine_call), LoRA's under vLLM's
    `lora` section, which is None without an adapter."""
    from evals.runner.config_resolver import ResolvedArm

    resolved = {}
    for arm, arm_spec in specs.items():
        engine = dict(resolver_input(arm_spec)["engine"])
        rank, enabled = engine.pop("max_lora_rank"), engine.pop("enable_lora")
        lora = {"max_lora_rank": rank} if enabled else None
        effective = {f"engine.{k}": v for k, v in engine.items()}
        effective.update({f"lora.{k}": v for k, v in lora.items()} if lora else {"lora": None})
        names = tuple(sorted(engine)) + ("enable_lora", "max_lora_rank")
        resolved[arm] = ResolvedArm(arm, effective, None, names, (), 0.0)
    return resolved


def test_an_adapter_only_difference_is_one_measurement_apart_in_ab_and_in_a_study(
        tmp_path, monkeypatch):
    """Two arms that differ only by `lora_adapter`: `ab`'s checks (arms differ, the config
    audit, the effective configs after the run) and a study's (arms differ, its audit of
    every arm and of each comparison) accept them alike; without the adapter both stop."""
    import json

    from evals.preflight import study_checks
    from evals.dispatch.arms import study_specs
    from evals.errors import UserError
    from evals.plan.config import load_config
    from evals.plan.study import load_run_config
    from evals.preflight import checks
    from evals.dispatch import config_audit as audit_run
    from evals.dispatch.arms import arm_specs

    monkeypatch.setattr(audit_run, "resolve_arms", _resolve_from_the_call)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}", encoding="utf-8")
    engine = {"max_num_seqs": 8}
    quiet = lambda line: None  # noqa: E731

    def write(name: str, arms: dict) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(json.dumps({"name": name, "model": "m", "tasks": [{"name": "tiny_addition"}],
                                    "arms": arms}), encoding="utf-8")
        return path

    def ab(candidate: dict) -> None:
        config = load_config(write("ab", {"baseline": {"engine": engine},
                                          "candidate": {"engine": engine, **candidate}}))
        specs = arm_specs(config, tmp_path / "ab-run")
        checks.check_arms_differ(config, specs)
        outcome = audit_run.config_audit(config, specs, echo=quiet)
        manifests = {arm: {"effective_engine_config": outcome.resolved[arm]} for arm in specs}
        audit_run.check_effective_configs(config, manifests, specs)

    def study(adapted: dict) -> None:
        loaded = load_run_config(write("study", {
            "baseline": {"engine": engine}, "adapted": {"engine": engine, **adapted},
            "more_seqs": {"engine": {"max_num_seqs": 16}}}))
        specs = study_specs(loaded, tmp_path / "study-run")
        study_checks.check_study_arms_differ(loaded, specs)
        audit_run.study_audit(loaded, specs, allow_undeclared=False, echo=quiet)

    ab({"lora_adapter": str(adapter)})
    study({"lora_adapter": str(adapter)})
    with pytest.raises(UserError, match="identical"):
        ab({})
    with pytest.raises(UserError, match="identical"):
        study({})
