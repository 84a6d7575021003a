"""The hybrid model (models/tiny-hybrid: Gated DeltaNet + gated attention, MoE, a Qwen3-Next
MTP layer) on vLLM's CPU backend: prefix caching alone and MTP alone run end to end through
`ab`, with vLLM's own counters showing each engaged; both together are refused before any
engine starts (on a CPU that pair stops in a Triton-only kernel; the GPU study is
configs/gpu/study_hybrid_mtp_prefix.yaml).

The three arms share one baseline (plain decoding, no prefix caching) through the session's
run store, so the module starts three engines.
"""

from __future__ import annotations

import pytest
from engine_helpers import ENGINE, REPO, read_summary, run_cli, save_artifact
from engine_helpers import write_config

HYBRID = REPO / "models" / "tiny-hybrid"
LIMIT = 40
TASKS = [{"name": "tiny_reviews_multiturn", "metric": "exact_match", "cluster": "conversation_id"},
         {"name": "tiny_reviews_shared_prefix", "metric": "exact_match"}]
# vLLM's CPU GDN kernel takes only bfloat16, whatever the CPU (ENGINE's dtype is float32
# on a CPU without AVX-512; preflight refuses a GDN model in another dtype)
HYBRID_ENGINE = {**ENGINE, "dtype": "bfloat16"}
PLAIN = {**HYBRID_ENGINE, "enable_prefix_caching": False}
MTP = {"method": "mtp", "num_speculative_tokens": 2}


def _ab(tmp_path_factory, name: str, candidate: dict, intended: list[str]):
    root = tmp_path_factory.mktemp(name)
    config = write_config(root, name, {"engine": PLAIN}, {"engine": candidate}, tasks=TASKS,
                          limit=LIMIT, model=str(HYBRID), intended_change=intended)
    done = run_cli("ab", str(config), "--reports", str(root / "reports"))
    return done, root / "reports"


@pytest.fixture(scope="module")
def prefix_run(tmp_path_factory):
    return _ab(tmp_path_factory, "hybrid-prefix",
               {**HYBRID_ENGINE, "enable_prefix_caching": True},
               # vLLM switches a hybrid model's Mamba cache to "align" with prefix caching
               ["enable_prefix_caching", "mamba_cache_mode", "mamba_block_size"])


@pytest.fixture(scope="module")
def mtp_run(tmp_path_factory, prefix_run):  # after prefix_run: the baseline is reused
    return _ab(tmp_path_factory, "hybrid-mtp", {**PLAIN, "speculative_config": MTP},
               ["speculative_config"])


def _rows(summary: dict) -> dict:
    return {(r["arm"], r["task"]): r for r in summary["exercise"]["tasks"]}


def test_prefix_caching_on_the_hybrid_model_runs_and_hits_the_cache(prefix_run):
    done, reports = prefix_run
    assert done.returncode in (0, 1, 3), done.stdout[-3000:] + done.stderr[-3000:]
    summary = read_summary(reports)
    save_artifact("hybrid_prefix_summary.json", summary)
    cand = summary["arms"]["candidate"]["effective_engine_config"]
    assert cand["cache.enable_prefix_caching"] is True
    assert cand["cache.mamba_cache_mode"] == "align"
    assert summary["arms"]["baseline"]["effective_engine_config"][
        "cache.mamba_cache_mode"] == "none"
    rows = _rows(summary)
    # the ~330-token system prompt and the conversations re-read from the cache (blocks of
    # 128 tokens, the GDN state cached at block boundaries)
    for task in ("tiny_reviews_multiturn", "tiny_reviews_shared_prefix"):
        assert rows[("candidate", task)]["cached_share"] > 0.2, rows[("candidate", task)]
        assert rows[("baseline", task)]["cached_tokens"] == 0
    # the trained model answers (a random one is at chance, about a third)
    by_task = {t["task"]: t for t in summary["tasks"]}
    assert by_task["tiny_reviews_multiturn"]["baseline_mean"] > 0.6, by_task


def test_mtp_on_the_hybrid_model_drafts_and_its_drafts_are_accepted(mtp_run):
    done, reports = mtp_run
    assert done.returncode in (0, 1, 3), done.stdout[-3000:] + done.stderr[-3000:]
    summary = read_summary(reports)
    save_artifact("hybrid_mtp_summary.json", summary)
    assert summary["arms"]["candidate"]["effective_engine_config"]["speculative.method"] in (
        "mtp", "qwen3_next_mtp")
    rows = _rows(summary)
    for task in ("tiny_reviews_multiturn", "tiny_reviews_shared_prefix"):
        assert rows[("candidate", task)]["drafted_tokens"] > 0
        # the MTP layer was trained on the next-next token: its drafts are mostly right
        assert rows[("candidate", task)]["acceptance"] > 0.5, rows[("candidate", task)]
    assert "reused from" in done.stdout  # the baseline came from the prefix run


def test_prefix_caching_with_mtp_on_the_hybrid_model_is_refused_before_any_engine(
        tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid-both")
    config = write_config(root, "hybrid-both", {"engine": PLAIN},
                          {"engine": {**HYBRID_ENGINE, "enable_prefix_caching": True,
                                      "speculative_config": MTP}},
                          tasks=TASKS, limit=LIMIT, model=str(HYBRID),
                          intended_change=["enable_prefix_caching", "speculative_config"])
    done = run_cli("ab", str(config), "--reports", str(root / "reports"), timeout=120)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "arms.candidate asks for prefix caching together with speculative decoding on a " \
           "hybrid (GDN / Mamba + attention) model" in done.stderr
    assert not (root / "reports").exists() and "starting" not in done.stdout
