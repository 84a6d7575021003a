"""Secrets in an arm's environment (evals.plan.secret_env): which names are secrets, the
config's own list, `env_from`, and what records, the content key and the worker get."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evals.dispatch.arms import arm_specs, run_id_for
from evals.errors import UserError
from evals.plan.config import load_config
from evals.plan.arm_env import arm_env, inline_secret_warnings
from evals.plan.secret_env import MARKER_PREFIX, is_secret, redacted
from evals.preflight.audit import audit_arms
from evals.runner.launch import worker_env

MODEL = Path(__file__).resolve().parents[2] / "models" / "tiny-reviews"
TOKEN = "hf_unitTestValue9f3c1e"


def write_config(tmp_path: Path, baseline: dict, candidate: dict | None = None,
                 **extra) -> Path:
    data = {"name": "secrets", "model": str(MODEL), "tasks": ["tiny_addition"], "limit": 5,
            "arms": {"baseline": {"engine": {"dtype": "bfloat16"}, **baseline},
                     "candidate": {"engine": {"dtype": "bfloat16", "enable_prefix_caching":
                                              True}, **(candidate or {})}},
            **extra}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["HF_TOKEN", "hf_token", "OPENAI_API_KEY", "api_key",
                                  "AWS_SECRET_ACCESS_KEY", "client_secret", "DB_PASSWORD",
                                  "Db_Password", "GOOGLE_APPLICATION_CREDENTIALS",
                                  "BASIC_AUTH", "oauth_header", "SESSION_COOKIE", "MyCookie"])
def test_secret_looking_names_are_secrets(name):
    assert is_secret(name)


@pytest.mark.parametrize("name", ["VLLM_CPU_KVCACHE_SPACE", "OMP_NUM_THREADS", "HF_HOME",
                                  "CUDA_VISIBLE_DEVICES", "PRIVATE_URL", "HF_HUB_OFFLINE"])
def test_other_names_are_not(name):
    assert not is_secret(name)


def test_the_configs_list_adds_names_matched_the_same_way():
    assert is_secret("MY_PRIVATE_URL", ["PRIVATE_URL"])
    assert is_secret("my_private_url_2", ["Private_Url"])
    assert not is_secret("MY_PUBLIC_URL", ["PRIVATE_URL"])


def test_a_secret_is_recorded_as_a_marker_and_passed_to_the_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALS_TEST_FROM_SHELL", "shellValue-71b2")
    config = load_config(write_config(
        tmp_path, {"env": {"HF_TOKEN": TOKEN, "MY_PRIVATE_URL": "https://in.house/x",
                           "VLLM_CPU_KVCACHE_SPACE": "1"},
                   "env_from": ["EVALS_TEST_FROM_SHELL"]},
        secret_env_names=["PRIVATE_URL"]))
    spec = arm_specs(config, tmp_path / "run")["baseline"]
    assert spec.env["VLLM_CPU_KVCACHE_SPACE"] == "1"  # not a secret: recorded as it is
    for name in ("HF_TOKEN", "MY_PRIVATE_URL", "EVALS_TEST_FROM_SHELL"):
        assert spec.env[name].startswith(MARKER_PREFIX), name
    assert spec.secret_env == {"HF_TOKEN": TOKEN, "MY_PRIVATE_URL": "https://in.house/x",
                               "EVALS_TEST_FROM_SHELL": "shellValue-71b2"}
    written = spec.to_json()
    for value in (TOKEN, "https://in.house/x", "shellValue-71b2"):
        assert value not in written and value not in repr(spec)
    assert json.loads(written)["env"]["HF_TOKEN"] == redacted("HF_TOKEN", TOKEN)
    env = worker_env(spec)
    assert env["HF_TOKEN"] == TOKEN and env["MY_PRIVATE_URL"] == "https://in.house/x"
    assert env["EVALS_TEST_FROM_SHELL"] == "shellValue-71b2"


def test_the_key_changes_with_the_value_and_not_between_runs(tmp_path):
    def keys(token: str, run: str) -> list[str]:
        config = load_config(write_config(tmp_path, {"env": {"HF_TOKEN": token}}))
        spec = arm_specs(config, tmp_path / run)["baseline"]
        return [spec.key_for(task) for task in spec.tasks]

    assert keys(TOKEN, "run1") == keys(TOKEN, "run2")  # the salt is the same every run
    assert keys(TOKEN, "run1") != keys(TOKEN + "x", "run1")


def test_the_marker_hash_is_salted_with_the_name():
    assert redacted("HF_TOKEN", TOKEN) != redacted("OPENAI_API_KEY", TOKEN)
    assert redacted("HF_TOKEN", TOKEN) == redacted("HF_TOKEN", TOKEN)
    assert redacted("HF_TOKEN", redacted("HF_TOKEN", TOKEN)) == redacted("HF_TOKEN", TOKEN)


def test_config_dumps_and_run_ids_hold_no_secret(tmp_path):
    path = write_config(tmp_path, {"env": {"HF_TOKEN": TOKEN}})
    config = load_config(path)
    dump = config.model_dump_json()
    assert TOKEN not in dump and redacted("HF_TOKEN", TOKEN) in dump
    assert config.arm("baseline").env["HF_TOKEN"] == TOKEN  # the loaded config keeps it
    other = load_config(write_config(tmp_path, {"env": {"HF_TOKEN": TOKEN + "x"}}))
    assert run_id_for(config) != run_id_for(other)


def test_the_audit_shows_secrets_as_markers(tmp_path):
    config = load_config(write_config(tmp_path, {"env": {"HF_TOKEN": TOKEN}},
                                      {"env": {"HF_TOKEN": TOKEN + "x"}},
                                      intended_change=["enable_prefix_caching", "env"]))
    result = audit_arms(config, {"baseline": None, "candidate": None})
    (row,) = [r for r in result.requested if r.field == "env.HF_TOKEN"]
    assert {row.baseline, row.candidate} == {redacted("HF_TOKEN", TOKEN),
                                             redacted("HF_TOKEN", TOKEN + "x")}
    assert TOKEN not in result.message()


def test_an_inline_secret_gets_a_warning_naming_env_from(tmp_path):
    config = load_config(write_config(tmp_path, {"env": {"HF_TOKEN": TOKEN, "OMP_X": "1"}}))
    (warning,) = inline_secret_warnings(config, ("baseline", "candidate"))
    assert "arms.baseline.env sets HF_TOKEN inline" in warning
    assert "env_from: [HF_TOKEN]" in warning and TOKEN not in warning


def test_env_from_a_variable_that_is_not_set_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.delenv("EVALS_TEST_UNSET_TOKEN", raising=False)
    config = load_config(write_config(tmp_path, {"env_from": ["EVALS_TEST_UNSET_TOKEN"]}))
    with pytest.raises(UserError, match="arms.baseline.env_from names EVALS_TEST_UNSET_TOKEN, "
                                        "which is not set in this environment"):
        arm_env(config, "baseline")


@pytest.mark.parametrize("arm, extra, expected", [
    ({"env": {"HF_TOKEN": "x"}, "env_from": ["HF_TOKEN"]}, {},
     "`arms.baseline`: HF_TOKEN is in both `env` and `env_from`; keep one."),
    ({"env_from": ["HF-TOKEN"]}, {},
     "`arms.baseline`: `env_from` entry 'HF-TOKEN' is not an environment variable name."),
    ({}, {"secret_env_names": ["PRIVATE URL"]},
     "`secret_env_names`: 'PRIVATE URL' is not (part of) an environment variable name."),
    ({}, {"secret_env_names": [""]},
     "`secret_env_names`: '' is not (part of) an environment variable name."),
])
def test_bad_secret_settings_name_the_key(tmp_path, arm, extra, expected):
    with pytest.raises(UserError) as err:
        load_config(write_config(tmp_path, arm, **extra))
    assert str(err.value).endswith(expected), str(err.value)
