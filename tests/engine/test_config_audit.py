"""Config audit on real vLLM effective configs, resolved without starting an engine.

Arms are resolved in a process of their own (vLLM's `create_engine_config`: configuration
files only; arms that share an environment share the process), so these tests take
seconds and stay far below the memory an engine would take (the CPU configs reserve a
2 GiB KV cache; the resolver allocates none).
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import yaml

from engine_helpers import ENGINE, LIMIT, MODEL, REPO, save_artifact
from evals.preflight.audit import arm_inputs, audit_resolved, run_audit
from evals.plan.config import load_config
from evals.plan.study import Study, load_run_config
from evals.runner.config_resolver import resolve_arms



def _shipped_cpu_configs() -> dict:
    """Every two-arm config in configs/cpu/, and each comparison of each study there
    (`study_mtp_prefix:decoding=mtp`): what `ab` audits."""
    configs = {}
    for path in sorted((REPO / "configs" / "cpu").glob("*.yaml")):
        if path.stem == "base":
            continue
        config = load_run_config(path)
        if isinstance(config, Study):
            configs.update({f"{path.stem}:{arm}": c for arm, c in config.comparisons.items()})
        else:
            configs[path.stem] = config
    return configs


CPU_CONFIGS = list(_shipped_cpu_configs())
KV_CACHE_BYTES = 2 * 2**30  # VLLM_CPU_KVCACHE_SPACE=2 in configs/cpu/base.yaml


def derived_config(tmp_path, name: str, candidate_engine: dict, intended: list[str]):
    """configs/cpu/base.yaml with the mtp_prefix baseline and the given candidate."""
    text = {"extends": str(REPO / "configs" / "cpu" / "base.yaml"), "name": name,
            "model": str(MODEL), "intended_change": intended,
            "arms": {"baseline": {"engine": {"dtype": "bfloat16", "max_model_len": 1024,
                                             "enable_prefix_caching": False}},
                     "candidate": {"engine": candidate_engine}}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(text, sort_keys=False), encoding="utf-8")
    return load_config(path)


@pytest.fixture(scope="module")
def timings():
    rows = {}
    yield rows
    save_artifact("config_audit_timings.json", rows)


@pytest.fixture(scope="module")
def shipped(timings):
    """Every arm of every shipped CPU config resolved at once: the arms share their worker
    environment (configs/cpu/base.yaml), so one process imports vLLM and resolves them all."""
    configs = _shipped_cpu_configs()
    specs = {f"{name}/{arm}": spec for name, config in configs.items()
             for arm, spec in arm_inputs(config).items()}
    started = time.time()
    resolved = resolve_arms(specs)
    timings["wall_seconds_all_configs"] = round(time.time() - started, 1)
    return configs, resolved


@pytest.mark.parametrize("name", CPU_CONFIGS)
def test_shipped_cpu_configs_pass_the_audit(name, shipped, timings):
    configs, everything = shipped
    config = configs[name]
    resolved = {arm: replace(everything[f"{name}/{arm}"], arm=arm)
                for arm in ("baseline", "candidate")}
    wall = timings["wall_seconds_all_configs"]
    result = audit_resolved(config, resolved)
    assert result.resolved, result.notes
    assert not result.stops, result.message()
    assert not result.undeclared
    timings[name] = {"wall_seconds_all_configs": wall, **{
        arm: {"seconds": r.seconds, "resolve_seconds": r.resolve_seconds,
              "peak_rss_mb": r.peak_rss_mb} for arm, r in resolved.items()}}
    for r in resolved.values():
        assert r.seconds < 120, timings[name]  # importing vLLM dominates; resolving is ~1 s
        assert r.peak_rss_mb * 2**20 < KV_CACHE_BYTES, timings[name]  # no KV cache, no weights
    if name.startswith("mtp_prefix") or name.endswith("+decoding=mtp"):  # offline and served
        status = {d.field: d.status for d in result.effective}
        assert status["cache.enable_prefix_caching"] == "declared"
        assert status["speculative"] == "declared"
        assert status["scheduler.max_num_scheduled_tokens"] == "follows speculative_config"
    if name == "aa":
        assert result.effective == () and result.requested == ()


def test_undeclared_max_num_seqs_difference_stops(tmp_path):
    config = derived_config(tmp_path, "mtp-unaligned", {
        "dtype": "bfloat16", "max_model_len": 1024, "enable_prefix_caching": True,
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 1},
        "max_num_seqs": 16}, ["speculative_config", "enable_prefix_caching"])
    result = run_audit(config)
    assert result.resolved and result.stops
    assert [u.name for u in result.undeclared] == ["max_num_seqs"]
    rows = {d.field: d for d in result.effective}
    assert rows["scheduler.max_num_seqs"].candidate == 16
    assert rows["scheduler.max_num_seqs"].status == "NOT DECLARED"
    message = result.stop_message()
    assert str(tmp_path / "mtp-unaligned.yaml") in message and "--allow-undeclared-diff" in message
    assert not result.with_override().stops


def test_a_knob_that_silently_changes_other_engine_arguments_stops(tmp_path):
    # `performance_mode: throughput` is declared, but vLLM also raises max_num_batched_tokens
    # and max_num_seqs - engine arguments that neither arm set: a side effect, not the change
    config = derived_config(tmp_path, "perf-mode", {
        "dtype": "bfloat16", "max_model_len": 1024, "enable_prefix_caching": False,
        "performance_mode": "throughput"}, ["performance_mode"])
    result = run_audit(config)
    assert result.resolved and result.stops
    names = {u.name for u in result.undeclared}
    assert {"max_num_batched_tokens", "max_num_seqs"} <= names
    assert all("although the arms do not set" in u.reason for u in result.undeclared)


def test_ab_stops_before_any_item_and_the_override_is_recorded(tmp_path):
    """`ab` end to end: the audit runs while the baseline engine starts; its stop exits 2
    before any item ran. With --allow-undeclared-diff the run goes on and says so."""
    import json

    from engine_helpers import read_summary, run_cli

    config = derived_config(tmp_path, "unaligned", {
        "dtype": ENGINE["dtype"], "max_model_len": 1024, "enable_prefix_caching": True,
        "max_num_seqs": 16, "enforce_eager": True}, ["enable_prefix_caching"])
    text = yaml.safe_load(open(config.source, encoding="utf-8"))
    # the baseline the other engine tests share: it may come from the session's store, then
    # the audit stops the run before the candidate's engine starts; else before its item
    text["arms"]["baseline"]["engine"] = {**ENGINE, "enable_prefix_caching": False}
    text.update(limit=LIMIT, tasks=[{"name": "tiny_addition", "metric": "exact_match"}])
    open(config.source, "w", encoding="utf-8").write(yaml.safe_dump(text))
    stopped = run_cli("ab", config.source, "--reports", str(tmp_path / "reports"))
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr
    assert "max_num_seqs" in stopped.stderr and config.source in stopped.stderr
    assert "--allow-undeclared-diff" in stopped.stderr and "Traceback" not in stopped.stderr
    # no item ran: the baseline's samples, if any, are the stored ones it reused
    markers = list((tmp_path / "reports").rglob("baseline/tasks/*.json"))
    if markers:
        assert all(json.loads(m.read_text())["reused_from"] for m in markers)
    else:
        assert not list((tmp_path / "reports").rglob("samples_*.jsonl"))
    assert not list((tmp_path / "reports").rglob("candidate/lm_eval/**/samples_*.jsonl"))
    # the candidate's worker started early to import (evals.runner.launch), but it never got
    # its engine turn: no engine started, no manifest written
    logs = list((tmp_path / "reports").rglob("candidate/worker.log"))
    assert all("candidate: starting" not in log.read_text() for log in logs)
    assert not list((tmp_path / "reports").rglob("candidate/manifest.json"))

    allowed = run_cli("ab", config.source, "--reports", str(tmp_path / "reports"),
                      "--allow-undeclared-diff")
    assert allowed.returncode in (0, 1, 3), allowed.stdout + allowed.stderr
    summary = read_summary(tmp_path / "reports")
    audit = summary["preflight"]["audit"]
    assert audit["allow_undeclared"] is True
    assert any("max_num_seqs" in w for w in summary["warnings"]), summary["warnings"]
    assert json.dumps(summary).count("NOT DECLARED") >= 1
