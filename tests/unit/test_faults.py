"""Canary faults without an engine: the catalog, config validation, the arm hand-off.

What the faults do inside vLLM is tested on real engines (tests/engine/test_canary.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evals.plan.arm_spec import ArmSpec
from evals.plan.config import load_config
from evals.errors import UserError
from evals.plan.fault_catalog import (ENV_VAR, FAULTS, check_applies,
                                  decode_env, encode_env, fault_fires)
from evals.runner.launch import FAULT_TALLY_ENV, worker_env
from evals.runner.layout import ArmLayout

REPO = Path(__file__).resolve().parents[2]
MTP_PREFIX = {"enable_prefix_caching": True,
              "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}


def test_fault_fires_is_deterministic_and_touches_the_rate_share():
    contents = [f"request {i}".encode() for i in range(20_000)]
    for rate in (0.05, 0.25, 0.5):
        fired = [fault_fires("prefix_hit_overrun", c, rate) for c in contents]
        assert fired == [fault_fires("prefix_hit_overrun", c, rate) for c in contents]
        # binomial standard error at n=20,000 is at most 0.0036: 4 SE
        assert abs(sum(fired) / len(contents) - rate) < 0.015
    # a smaller rate touches a subset of what a larger one touches (same hash threshold)
    low = {c for c in contents if fault_fires("kv_scale", c, 0.1)}
    high = {c for c in contents if fault_fires("kv_scale", c, 0.3)}
    assert low <= high
    # different faults pick different requests
    other = {c for c in contents if fault_fires("prefix_key_collision", c, 0.1)}
    assert other != low
    assert all(fault_fires("spec_unverified", c, 1.0) for c in contents[:100])


@pytest.mark.parametrize("fault, engine, mode, expected", [
    ({"name": "kv_scale"}, {"kv_cache_dtype": "auto"}, "offline", "no FP8 KV cache"),
    ({"name": "kv_scale"}, {"kv_cache_dtype": "fp8_e4m3"}, "offline", None),
    ({"name": "spec_unverified"}, {}, "offline", "no speculative_config"),
    ({"name": "spec_unverified"}, MTP_PREFIX, "server", None),
    ({"name": "prefix_hit_overrun"}, {"enable_prefix_caching": False}, "offline",
     "turns prefix caching off"),
    # the interaction fault is accepted everywhere: it stays inert unless both are on
    ({"name": "prefix_hit_overrun", "only_with_spec_decode": True},
     {"enable_prefix_caching": False}, "offline", None),
    ({"name": "benign_tie_noise"}, {}, "endpoint", "runs no vLLM engine of ours"),
    ({"name": "benign_tie_noise"}, {}, "hf", "runs no vLLM engine of ours"),
])
def test_check_applies(fault, engine, mode, expected):
    problem = check_applies(fault, engine, mode)
    assert (problem is None) if expected is None else (expected in problem)


def test_env_round_trip_and_refusal():
    faults = [{"name": "kv_scale", "rate": 0.1}]
    assert decode_env(encode_env(faults)) == faults
    with pytest.raises(ValueError, match="prefix_hit_overrun"):
        decode_env('[{"name": "no_such_fault"}]')


CONFIG = """
name: t
model: {model}
tasks: [tiny_reviews_gen]
arms:
  baseline: {{engine: {{dtype: bfloat16, enable_prefix_caching: false}}}}
  candidate:
    engine: {{dtype: bfloat16, enable_prefix_caching: true, kv_cache_dtype: {kv}}}
    faults: {faults}
"""


def _config(tmp_path: Path, faults: str, kv: str = "auto") -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(model=REPO / "models" / "tiny-reviews", faults=faults, kv=kv),
                    encoding="utf-8")
    return path


def test_fault_config_fills_the_default_rate(tmp_path):
    config = load_config(_config(tmp_path, "[{name: prefix_hit_overrun}, {name: kv_scale, "
                                           "rate: 0.5}]", kv="fp8"))
    faults = config.arms.candidate.faults
    assert faults[0].rate == FAULTS["prefix_hit_overrun"].default_rate
    assert faults[1].rate == 0.5 and not faults[1].only_with_spec_decode


@pytest.mark.parametrize("faults, message", [
    ("[{name: bit_flip}]", "arms.candidate.faults.0.name"),
    ("[{name: prefix_hit_overrun, rate: 0}]", "greater than 0"),
    ("[{name: prefix_hit_overrun, rate: 1.5}]", "less than or equal to 1"),
    ("[{name: kv_scale}]", "cannot apply to this arm: the arm has no FP8 KV cache"),
    ("[{name: spec_unverified}]", "no speculative_config"),
    ("[{name: kv_scale, only_with_spec_decode: true}]", "option of prefix_hit_overrun only"),
    ("[{name: benign_tie_noise}, {name: benign_tie_noise}]", "listed twice"),
])
def test_bad_fault_config_is_one_clear_error(tmp_path, faults, message):
    with pytest.raises(UserError, match=message.replace(".", r"\.")):
        load_config(_config(tmp_path, faults))


def test_bad_fault_exits_2_in_one_line_before_any_engine(tmp_path):
    path = _config(tmp_path, "[{name: kv_scale}]")
    proc = subprocess.run([sys.executable, "-m", "evals", "ab", str(path), "--reports",
                           str(tmp_path / "r")], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "kv_scale" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r").exists()


def _spec(tmp_path: Path, faults=()) -> ArmSpec:
    return ArmSpec(arm="candidate", model=str(tmp_path), engine={}, env={}, tasks=("t",),
                   limit=None, num_fewshot=None, seed=1, include_paths=(),
                   output_dir=str(tmp_path / "arm"), versions={"vllm": "x"}, faults=faults)


def test_a_fault_reaches_only_the_arm_that_asked_for_it(tmp_path, monkeypatch):
    # even a fault left in the user's shell must not reach an arm without faults
    monkeypatch.setenv(ENV_VAR, '[{"name": "benign_tie_noise", "rate": 1.0}]')
    monkeypatch.setenv(FAULT_TALLY_ENV, "/tmp/elsewhere")
    clean = worker_env(_spec(tmp_path))
    assert ENV_VAR not in clean and FAULT_TALLY_ENV not in clean
    faults = ({"name": "kv_scale", "rate": 0.1, "only_with_spec_decode": False},)
    env = worker_env(_spec(tmp_path, faults))
    assert json.loads(env[ENV_VAR]) == list(faults)
    assert env[FAULT_TALLY_ENV] == str(ArmLayout(tmp_path / "arm").fault_tally_dir)


def test_faults_change_the_content_key_and_no_faults_keep_it(tmp_path):
    plain = _spec(tmp_path)
    faulty = _spec(tmp_path, ({"name": "kv_scale", "rate": 0.1},))
    other = _spec(tmp_path, ({"name": "kv_scale", "rate": 0.2},))
    assert len({plain.key_for("t"), faulty.key_for("t"), other.key_for("t")}) == 3
    data = json.loads(plain.to_json())
    data.pop("faults")  # a spec written before faults existed reads back with the same key
    assert ArmSpec.from_dict(data).key_for("t") == plain.key_for("t")


def test_fault_tally_sums_processes_and_skips_torn_files(tmp_path):
    layout = ArmLayout(tmp_path)
    layout.fault_tally_dir.mkdir()
    (layout.fault_tally_dir / "1.json").write_text('{"kv_scale": 3}' + " " * 40)
    (layout.fault_tally_dir / "2.json").write_text('{"kv_scale": 4, "benign_tie_noise": 1}')
    (layout.fault_tally_dir / "3.json").write_text('{"kv_sc')
    assert layout.fault_tally() == {"kv_scale": 7, "benign_tie_noise": 1}
