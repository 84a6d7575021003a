"""`chat:`, `decoding:` and `repeats:` (issue 53): valid configs, what each arm's worker gets,
and each bad input as one line naming what is wrong (exit 2 through the CLI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evals.dispatch.arms import arm_specs
from evals.errors import UserError
from evals.plan.config import check_local_models, load_config
from evals.plan.decoding import arm_sampling, gen_kwargs, repeats_warnings
from evals.preflight.audit import audit_arms

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "tiny-reviews"
TEMPLATE = "{% for m in messages %}{{ m.content }}\n{% endfor %}"

BASE = """
name: t
model: {model}
tasks: [tiny_addition]
seed: 7
intended_change: [enable_prefix_caching{extra_intended}]
arms:
  baseline: {{engine: {{dtype: bfloat16}}{baseline}}}
  candidate: {{engine: {{dtype: bfloat16, enable_prefix_caching: true}}{candidate}}}
"""


def write(tmp_path: Path, top: str = "", *, baseline: str = "", candidate: str = "",
          extra_intended: str = "", model: Path = MODEL) -> Path:
    (tmp_path / "chat.jinja").write_text(TEMPLATE, encoding="utf-8")
    text = BASE.format(model=model, baseline=baseline, candidate=candidate,
                       extra_intended=extra_intended) + top
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


SAMPLED = ("chat: {template: chat.jinja, system: Answer briefly.}\n"
           "decoding: {temperature: 0.6, top_p: 0.95, max_tokens: 12}\nrepeats: 4\n")


def test_a_sampled_chat_config_reaches_each_arm_spec(tmp_path):
    config = load_config(write(tmp_path, SAMPLED))
    assert config.chat.template == str((tmp_path / "chat.jinja").resolve())
    check_local_models(config)  # a template file: the model needs none of its own
    specs = arm_specs(config, tmp_path / "run")
    for name in ("baseline", "candidate"):
        sampling = specs[name].sampling
        assert sampling["chat"]["template"] == TEMPLATE  # the text: the key changes with it
        assert sampling["chat"]["system"] == "Answer briefly."
        assert sampling["decoding"] == {"temperature": 0.6, "top_p": 0.95, "max_tokens": 12}
        assert sampling["repeats"] == 4 and sampling["seed"] == 7
    assert repeats_warnings(config) == []


def test_no_sampling_settings_keep_the_old_spec_and_key(tmp_path):
    config = load_config(write(tmp_path))
    assert arm_sampling(config, "baseline") is None
    assert "sampling" not in arm_specs(config, tmp_path / "run")["baseline"].key_parts(
        "tiny_addition")


def test_the_template_text_is_part_of_the_key(tmp_path):
    first = arm_specs(load_config(write(tmp_path, SAMPLED)), tmp_path / "r")["baseline"]
    (tmp_path / "other").mkdir()
    path = write(tmp_path / "other", SAMPLED)
    (tmp_path / "other" / "chat.jinja").write_text(TEMPLATE + "!", encoding="utf-8")
    second = arm_specs(load_config(path), tmp_path / "r")["baseline"]
    assert first.key_for("tiny_addition") != second.key_for("tiny_addition")


def test_gen_kwargs_turn_sampling_on_and_name_max_gen_toks():
    assert gen_kwargs({"temperature": 0.6, "top_p": 0.9, "max_tokens": 5}) == {
        "temperature": 0.6, "top_p": 0.9, "do_sample": True, "max_gen_toks": 5}
    assert gen_kwargs({"temperature": 0.0}) == {"temperature": 0.0, "do_sample": False}
    assert gen_kwargs({}) == {}


def test_a_declared_decoding_override_is_allowed_and_audited(tmp_path):
    config = load_config(write(tmp_path, SAMPLED, candidate=", decoding: {temperature: 0.7}",
                               extra_intended=", decoding.temperature"))
    specs = arm_specs(config, tmp_path / "run")
    assert specs["candidate"].sampling["decoding"]["temperature"] == 0.7
    assert specs["baseline"].sampling["decoding"]["temperature"] == 0.6
    result = audit_arms(config, {"baseline": None, "candidate": None},
                        engine_arg_names=["enable_prefix_caching", "dtype"])
    rows = {row.field: row for row in result.requested}
    assert rows["decoding.temperature"].status == "declared"
    assert result.unknown_declared == () and result.undeclared == ()


def test_repeats_with_greedy_decoding_warn(tmp_path):
    config = load_config(write(tmp_path, "repeats: 3\n"))
    [warning] = repeats_warnings(config)
    assert "repeats: 3" in warning and "greedy" in warning and "identical" in warning


@pytest.mark.parametrize("top, arms, expected", [
    (SAMPLED, {"candidate": ", decoding: {top_p: 0.5}"},
     "the arms differ in decoding setting `top_p` (0.95 vs 0.5), which `intended_change` "
     "does not list; add `decoding.top_p`"),
    (SAMPLED, {"baseline": ", mode: server"},
     "`chat`, `decoding` and `repeats` need offline arms for now"),
    ("repeats: 2\nsequential: {chunk: 10}\n", {}, "`repeats` and `sequential` cannot be combined"),
    ("decoding: {temperature: -1}\n", {}, "`decoding.temperature`"),
    ("decoding: {temprature: 1}\n", {}, "unknown key `decoding.temprature`"),
    ("repeats: 0\n", {}, "`repeats`"),
    ("chat: {template: missing.jinja}\n", {}, "`chat.template` file"),
    ("chat: {template: true}\n", {},
     f"`chat.template: true`, but model {MODEL} (arm baseline) has no chat template"),
])
def test_bad_sampling_input_exits_2_in_one_line(tmp_path, top, arms, expected):
    path = write(tmp_path, top, **arms)
    with pytest.raises(UserError) as caught:
        check_local_models(load_config(path))
    assert expected in str(caught.value)
    assert str(path) in str(caught.value)


def test_the_cli_says_it_in_one_line_with_exit_2(tmp_path):
    path = write(tmp_path, "chat: {template: true}\n")
    result = subprocess.run([sys.executable, "-m", "evals", "ab", str(path), "--reports",
                             str(tmp_path / "reports")], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"model {MODEL} (arm baseline) has no chat template" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.count("\n") <= 2
