"""Model preflight: planted problems in copies of the shipped model are found, the shipped
model and configs are clean, and the CLI exits 2 on errors without a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evals.plan.config import load_config
from evals.hardware import Platform, parse_cpuinfo
from evals.preflight.doctor import DoctorReport, diagnose_config, diagnose_model
from evals.errors import UserError

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "tiny-reviews"


def copy_model(directory: Path, name: str = "model") -> Path:
    target = directory / name
    shutil.copytree(MODEL, target)
    return target


def edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data.update(changes)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def write_config(directory: Path, baseline: dict, candidate: dict) -> Path:
    config = {"name": "doctor-test", "model": str(MODEL), "tasks": ["tiny_reviews_gen"],
              "arms": {"baseline": baseline, "candidate": candidate}}
    path = directory / "ab.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def codes(findings) -> dict[str, str]:
    return {f.code: f.severity for f in findings}


@pytest.fixture(scope="module")
def lora_adapter(tmp_path_factory) -> Path:
    """A real, unmerged PEFT LoRA adapter (q_proj, v_proj) on the shipped model."""
    pytest.importorskip("peft", reason="peft is in the `test` extra")
    transformers = pytest.importorskip("transformers")
    from peft import LoraConfig, get_peft_model

    # the checkpoint says MiMoForCausalLM with model_type qwen2: transformers loads the Qwen2
    # body and leaves the MTP layer's weights unused, which is all an adapter needs
    base = transformers.AutoModelForCausalLM.from_pretrained(str(MODEL))
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, task_type="CAUSAL_LM",
                                                 target_modules=["q_proj", "v_proj"]))
    out = tmp_path_factory.mktemp("lora") / "tiny-reviews-lora"
    peft_model.save_pretrained(str(out))
    return out


def test_shipped_model_is_clean():
    findings = diagnose_model(MODEL, arm_dtype="bfloat16")
    assert findings == ()


@pytest.mark.parametrize("name", ["mtp_prefix", "kv_fp8", "w4a16", "aa"])
def test_shipped_cpu_configs_have_no_errors(name):
    # on a CPU with AVX-512 (the recorded one): what an AVX2-only CPU cannot run is an error
    # there, checked in tests/unit/test_cpu_support.py
    avx512 = parse_cpuinfo((REPO / "tests/fixtures/cpuinfo/epyc_zen4_avx512.txt").read_text())
    platform = Platform("x86_64", *avx512, (), "recorded")
    report = diagnose_config(load_config(REPO / "configs" / "cpu" / f"{name}.yaml"),
                             platform=platform)
    assert not report.errors and not report.warnings, report.lines()
    report.check()


def test_unmerged_lora_adapter_directory_is_an_error(lora_adapter):
    assert (lora_adapter / "adapter_config.json").is_file()
    (finding,) = diagnose_model(lora_adapter, arm="candidate")
    assert finding.severity == "error" and finding.code == "unmerged-lora"
    assert finding.arm == "candidate"
    assert str(lora_adapter / "adapter_config.json") in finding.message
    assert f"`{MODEL}`" in finding.message  # the base model adapter_config.json names
    assert "enable_lora" in finding.message and "merge" in finding.message


def test_adapter_saved_into_a_model_directory_is_an_error(tmp_path, lora_adapter):
    model = copy_model(tmp_path)
    for item in lora_adapter.iterdir():
        shutil.copy(item, model / item.name)
    findings = diagnose_model(model)
    assert codes(findings) == {"unmerged-lora": "error"}
    assert "ignores the adapter" in findings[0].message


def test_adapter_weights_without_adapter_config_are_found(tmp_path):
    model = copy_model(tmp_path)
    (model / "adapter_model.safetensors").write_bytes(b"\0" * 16)
    assert codes(diagnose_model(model)) == {"unmerged-lora": "error"}


@pytest.mark.parametrize("where", ["top", "text_config"])
def test_use_cache_false_is_a_warning(tmp_path, where):
    model = copy_model(tmp_path)
    if where == "top":
        edit_json(model / "config.json", use_cache=False)
    else:
        edit_json(model / "config.json", text_config={"use_cache": False})
    (finding,) = diagnose_model(model)
    assert (finding.severity, finding.code) == ("warning", "use-cache-off")
    assert str(model / "config.json") in finding.message
    assert ("text_config.use_cache" in finding.message) == (where == "text_config")


def test_generation_config_that_changes_decoding_is_a_warning(tmp_path):
    model = copy_model(tmp_path)
    edit_json(model / "generation_config.json", temperature=0.7, top_p=0.8, do_sample=True)
    (finding,) = diagnose_model(model)
    assert (finding.severity, finding.code) == ("warning", "generation-config")
    assert "temperature=0.7" in finding.message and "top_p=0.8" in finding.message
    assert "generation_config: vllm" in finding.message
    # an arm that asks for vLLM's neutral defaults is not affected
    assert diagnose_model(model, generation_config="vllm") == ()


def test_neutral_generation_config_is_clean(tmp_path):
    model = copy_model(tmp_path)
    edit_json(model / "generation_config.json", temperature=1.0, top_k=0, do_sample=False)
    assert diagnose_model(model) == ()


def test_dtype_mismatch_with_the_arm_is_a_warning():
    assert codes(diagnose_model(MODEL, arm_dtype="float16")) == {"dtype-mismatch": "warning"}
    assert diagnose_model(MODEL, arm_dtype="auto") == ()
    assert diagnose_model(MODEL, arm_dtype="bf16") == ()


def test_chat_templates_differing_between_arms_are_a_warning(tmp_path):
    a, b = copy_model(tmp_path, "a"), copy_model(tmp_path, "b")
    edit_json(a / "tokenizer_config.json", chat_template="{{ messages[0]['content'] }}")
    (b / "chat_template.jinja").write_text("<|user|>{{ messages[0]['content'] }}", "utf-8")
    config = load_config(write_config(tmp_path, {"model": str(a)}, {"model": str(b)}))
    report = diagnose_config(config)
    assert codes(report.findings) == {"chat-template-differs": "warning"}
    message = report.findings[0].message
    assert str(a / "tokenizer_config.json") in message and str(b / "chat_template.jinja") in message
    # the same template, stored either way, is the same template
    (b / "chat_template.jinja").write_text("{{ messages[0]['content'] }}", "utf-8")
    assert diagnose_config(config).findings == ()


def test_config_lists_findings_shared_by_both_arms_once(tmp_path):
    model = copy_model(tmp_path)
    edit_json(model / "config.json", use_cache=False)
    arm = {"engine": {"dtype": "bfloat16"}}
    config = load_config(write_config(tmp_path, arm, {**arm, "engine": {"dtype": "bfloat16",
                                                                        "enable_prefix_caching": True}})
                         ).model_copy(update={"model": str(model)})
    (finding,) = diagnose_config(config).findings
    assert finding.arm == "baseline, candidate" and finding.code == "use-cache-off"


def test_missing_and_non_directory_models_are_errors(tmp_path):
    assert codes(diagnose_model(tmp_path / "absent")) == {"model-missing": "error"}
    (tmp_path / "file.bin").write_bytes(b"x")
    assert codes(diagnose_model(tmp_path / "file.bin")) == {"not-a-directory": "error"}
    (tmp_path / "empty").mkdir()
    (finding,) = diagnose_model(tmp_path / "empty")
    assert finding.code == "missing-config" and str(tmp_path / "empty") in finding.message


def test_hub_ids_are_not_checked():
    (finding,) = diagnose_model("Qwen/Qwen2.5-7B-Instruct")
    assert finding.severity == "info" and "not checked (hub id)" in finding.message


def test_report_is_json_and_check_raises_on_errors(tmp_path, lora_adapter):
    config = load_config(write_config(tmp_path, {}, {"model": str(lora_adapter)}))
    report = diagnose_config(config)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["errors"] == 1 and data["findings"][0]["arm"] == "candidate"
    assert report.warning_lines() and all("unmerged-lora" in line for line in report.warning_lines())
    with pytest.raises(UserError, match=r"ab\.yaml: the model preflight found 1 error"):
        report.check()
    DoctorReport(source="x", findings=()).check()


def run_doctor(target) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evals", "doctor", str(target)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_cli_exit_codes_and_no_traceback(tmp_path, lora_adapter):
    bad = run_doctor(lora_adapter)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "unmerged-lora" in bad.stdout and "Traceback" not in bad.stdout + bad.stderr

    warned = copy_model(tmp_path)
    edit_json(warned / "config.json", use_cache=False)
    ok = run_doctor(warned)
    assert ok.returncode == 0 and "use-cache-off" in ok.stdout  # warnings only: exit 0

    config = run_doctor(REPO / "configs" / "cpu" / "mtp_prefix.yaml")
    assert config.returncode == 0 and "0 error(s)" in config.stdout

    missing = run_doctor(tmp_path / "nope.yaml")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stdout + missing.stderr
