"""Config loading: valid files, `extends`, and bad input that names file and key path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evals.plan.config import load_config
from evals.plan.study import Study, load_run_config
from evals.errors import UserError

REPO = Path(__file__).resolve().parents[2]

VALID = """
name: t
model: {model}
tasks: [tiny_reviews_gen, {{name: tiny_reviews_mc, metric: acc, gate: false}}]
arms:
  baseline: {{engine: {{dtype: bfloat16}}}}
  candidate: {{engine: {{dtype: bfloat16, enable_prefix_caching: true}}}}
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_config_loads_with_defaults(tmp_path):
    config = load_config(write(tmp_path, VALID.format(model=tmp_path)))
    assert [t.name for t in config.tasks] == ["tiny_reviews_gen", "tiny_reviews_mc"]
    assert config.tasks[0].metric == "acc" and config.tasks[1].gate is False
    assert config.gate.alpha == 0.05 and config.gate.correction == "holm"
    assert config.arms.candidate.engine["enable_prefix_caching"] is True


def test_extends_merges_nested_mappings(tmp_path):
    write(tmp_path, VALID.format(model=tmp_path), "base.yaml")
    child = write(tmp_path, "extends: base.yaml\nname: child\nlimit: 7\n"
                  "arms: {candidate: {engine: {kv_cache_dtype: fp8}}}\n")
    config = load_config(child)
    assert config.name == "child" and config.limit == 7
    assert config.arms.candidate.engine == {"dtype": "bfloat16", "enable_prefix_caching": True,
                                            "kv_cache_dtype": "fp8"}
    assert config.arms.baseline.engine == {"dtype": "bfloat16"}


def test_shipped_configs_all_load():
    paths = sorted(p for p in (REPO / "configs").rglob("*.yaml") if p.name != "base.yaml")
    # the default config (README, `nox -s ab`) and one config of each folder are among them: an empty or
    # misdirected glob fails here instead of passing on nothing
    names = {p.relative_to(REPO / "configs").as_posix() for p in paths}
    assert {"mtp_prefix.yaml", "cpu/aa.yaml", "gpu/mtp_prefix.yaml"} <= names, sorted(names)
    assert len(paths) >= 20, len(paths)
    for path in paths:
        config = load_run_config(path)
        settings = config.settings if isinstance(config, Study) else config
        assert settings.tasks, path


@pytest.mark.parametrize("text, expected", [
    ("name: t\nmodel: m\ntasks: [a]\narms: {baseline: {engine: {}}, candidate: {engine: {}}}\n"
     "gate: {alpha: 0.05, margn: 0.02}\n", "unknown key `gate.margn`"),
    ("name: t\nmodel: m\ntasks: [a]\narms: {baseline: {engin: {}}, candidate: {engine: {}}}\n",
     "unknown key `arms.baseline.engin`"),
    ("name: t\nmodel: m\ntasks: [a]\narms: {baseline: {engine: {}}}\n",
     "missing required key `arms.candidate`"),
    ("name: t\nmodel: m\ntasks: [a]\narms: {baseline: {engine: {}}, candidate: {engine: {}}}\n"
     "gate: {alpha: 2}\n", "`gate.alpha`"),
    ("name: t\nmodel: m\ntasks: [a, a]\narms: {baseline: {engine: {}}, candidate: {engine: {}}}\n",
     "task `a` is listed twice"),
    ("name: t\nmodel: m\ntasks: [a]\narms: {baseline: {engine: {}}, candidate: {engine: {}}}\n"
     "sequential: {chunk: 5}\n", "`sequential.chunk`"),
    ("name: t\nmodel: m\ntasks: [a]\narms: {baseline: {engine: {}}, candidate: {engine: {}}}\n"
     "sequential: {chunks: 50}\n", "unknown key `sequential.chunks`"),
    ("name: [unclosed\n", "not valid YAML at line"),
    ("- a list\n", "top level must be a mapping"),
    ("extends: nowhere.yaml\n", "nowhere.yaml does not exist"),
])
def test_bad_config_names_file_and_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_config(path)
    assert expected in str(info.value)
    assert str(path) in str(info.value) or "nowhere.yaml" in str(info.value)


def test_extends_loop_is_reported(tmp_path):
    write(tmp_path, "extends: b.yaml\n", "a.yaml")
    write(tmp_path, "extends: a.yaml\n", "b.yaml")
    with pytest.raises(UserError, match="loops back"):
        load_config(tmp_path / "a.yaml")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evals", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "missing.yaml", "does not exist"),
    (lambda d: write(d, "name: t\nmodel: m\nunknown_key: 1\n"), "unknown key `unknown_key`"),
    (lambda d: write(d, VALID.format(model=d / "no-such-model")), "does not exist"),
    (lambda d: write(d, VALID.format(model=d).replace(", enable_prefix_caching: true", "")),
     "are identical"),
])
def test_cli_bad_input_exits_2_without_traceback(tmp_path, make, expected):
    result = run_cli("ab", str(make(tmp_path)), "--reports", str(tmp_path / "reports"))
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.count("\n") <= 2


def test_cli_usage_error_exits_2():
    result = run_cli("frobnicate")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_compare_missing_dirs_exit_2(tmp_path):
    result = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"),
                     "--reports", str(tmp_path / "r"))
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_model_fingerprint_sees_changed_weight_values(tmp_path):
    """Noise added to weights keeps shapes and file size; the fingerprint must still change."""
    import numpy as np
    from safetensors.numpy import save_file

    from evals.plan.arm_spec import model_fingerprint

    weights = {"w": np.ones((64, 64), dtype=np.float32)}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    save_file(weights, str(tmp_path / "a" / "model.safetensors"))
    weights["w"][3, 5] = 1.5
    save_file(weights, str(tmp_path / "b" / "model.safetensors"))
    assert (tmp_path / "a/model.safetensors").stat().st_size == \
        (tmp_path / "b/model.safetensors").stat().st_size
    assert model_fingerprint(str(tmp_path / "a")) != model_fingerprint(str(tmp_path / "b"))
    assert model_fingerprint(str(tmp_path / "a")) == model_fingerprint(str(tmp_path / "a"))


def test_hub_ids_are_not_mistaken_for_missing_paths(tmp_path):
    from evals.plan.config import check_local_models

    for model in ("gpt2", "Qwen/Qwen2.5-7B-Instruct"):
        config = load_config(write(tmp_path, VALID.format(model=model), f"{model[:4]}.yaml"))
        check_local_models(config)  # no error: a hub id, not a path
    missing = load_config(write(tmp_path, VALID.format(model="./models/nope"), "m.yaml"))
    with pytest.raises(UserError, match="does not exist"):
        check_local_models(missing)
