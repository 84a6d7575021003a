"""A LoRA adapter served unmerged by vLLM vs the same adapter merged into a checkpoint: an
ordinary A/B. The adapter is built by the test with PEFT from the shipped model."""

from __future__ import annotations

import shutil

import torch
from engine_helpers import ENGINE, MODEL, read_summary, run_cli, save_artifact, write_config

TASKS = [{"name": "tiny_reviews_gen", "metric": "exact_match"},
         {"name": "tiny_addition", "metric": "exact_match"}]
PROMPTS = [f"{a} + {b} =" for a, b in zip(range(11, 91, 4), range(17, 97, 4))]


def _greedy(model, tokenizer) -> list[str]:
    out = []
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            gen = model.generate(ids, max_new_tokens=4, do_sample=False)
        out.append(tokenizer.decode(gen[0, ids.shape[1]:]))
    return out


def _adapter_and_merged(tmp_path):
    import transformers
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(MODEL))
    base = transformers.AutoModelForCausalLM.from_pretrained(str(MODEL), dtype=torch.float32)
    before = _greedy(base, tokenizer)
    lora = LoraConfig(r=8, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj"],
                      init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(base, lora)
    adapter = tmp_path / "adapter"
    model.save_pretrained(str(adapter))
    merged_model = model.merge_and_unload()
    merged = tmp_path / "merged"
    merged_model.save_pretrained(str(merged))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (MODEL / name).exists():
            shutil.copy(MODEL / name, merged / name)
    after = _greedy(merged_model, tokenizer)
    changed = sum(a != b for a, b in zip(before, after))
    return adapter, merged, changed


def test_unmerged_adapter_vs_merged_checkpoint(tmp_path):
    adapter, merged, changed = _adapter_and_merged(tmp_path)
    # the adapter matters: if vLLM ignored it, the unmerged arm would be the base model
    assert changed >= len(PROMPTS) // 4, changed
    config = write_config(
        tmp_path, "lora", {"model": str(merged), "engine": dict(ENGINE)},
        {"lora_adapter": str(adapter), "engine": {**ENGINE, "max_lora_rank": 8}},
        tasks=TASKS, limit=150)
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"))
    assert result.returncode in (0, 3), result.stdout + result.stderr
    summary = read_summary(tmp_path / "reports")
    cand = summary["arms"]["candidate"]["effective_engine_config"]
    assert cand["lora.max_lora_rank"] == 8
    # merged and unmerged compute the same function up to rounding: few answers differ
    flips = sum(t["correct_to_wrong"] + t["wrong_to_correct"] for t in summary["tasks"])
    assert flips <= 0.05 * 300, summary["tasks"]
    save_artifact("lora_ab.json", {"flips": flips, "hf_changed_by_adapter": changed,
                                   "verdict": summary["verdict"],
                                   "tasks": [{k: t[k] for k in ("task", "baseline_mean",
                                                                "candidate_mean", "delta")}
                                             for t in summary["tasks"]]})
