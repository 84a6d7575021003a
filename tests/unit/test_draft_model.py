"""The draft of the embedded model (models/tiny-reviews-draft, scripts/draft_model.py) and the
draft-model configs (issue 55): the committed draft is what the script makes of the target
(its first decoder layer, embeddings, norm and head; no MTP layer), a config's draft path is
resolved like a model's, and the draft's files are part of the arms' content key."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest
from safetensors.torch import load_file

from evals.plan.arm_spec import ArmSpec
from evals.plan.config import load_config

ROOT = Path(__file__).resolve().parents[2]
TARGET, DRAFT = ROOT / "models" / "tiny-reviews", ROOT / "models" / "tiny-reviews-draft"


def _script():
    spec = importlib.util.spec_from_file_location("draft_model", ROOT / "scripts" /
                                                  "draft_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_draft_is_the_targets_first_layer():
    script = _script()
    target_config = json.loads((TARGET / "config.json").read_text(encoding="utf-8"))
    draft_config = json.loads((DRAFT / "config.json").read_text(encoding="utf-8"))
    assert draft_config == script.draft_config(target_config, 1)
    assert draft_config["num_hidden_layers"] == 1 and "num_nextn_predict_layers" not in draft_config
    target, draft = load_file(str(TARGET / "model.safetensors")), load_file(
        str(DRAFT / "model.safetensors"))
    assert sorted(draft) == sorted(k for k in target if script.kept(k, 1))
    assert all(not k.startswith(("model.layers.1.", "model.mtp_layers.")) for k in draft)
    assert all(draft[k].equal(target[k]) for k in draft)


def test_a_draft_needs_fewer_layers_than_its_target():
    with pytest.raises(SystemExit):
        _script().draft_config({"num_hidden_layers": 3}, 3)


@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_the_configs_resolve_the_draft_path(where):
    config = load_config(ROOT / "configs" / where / "draft_model_load_curve.yaml")
    draft = config.arm("candidate").engine["speculative_config"]["model"]
    assert Path(draft) == DRAFT.resolve()
    base = config.arm("baseline").engine
    assert base["kv_cache_memory_bytes"] == config.arm("candidate").engine["kv_cache_memory_bytes"]


def test_the_drafts_files_are_part_of_the_key(tmp_path):
    spec = ArmSpec(arm="candidate", model=str(TARGET), engine={}, env={}, tasks=("t",),
                   limit=1, num_fewshot=0, seed=1, include_paths=(), output_dir=str(tmp_path),
                   versions={}, platform={})
    plain = spec.with_fingerprint()
    copy = tmp_path / "draft"
    copy.mkdir()
    for item in DRAFT.iterdir():
        (copy / item.name).write_bytes(item.read_bytes())
    drafted = replace(spec, engine={"speculative_config": {"model": str(copy)}}).with_fingerprint()
    assert drafted.model_hash.startswith(plain.model_hash + "+")
    (copy / "config.json").write_text("{}", encoding="utf-8")  # another draft, same path
    changed = replace(spec, engine={"speculative_config": {"model": str(copy)}}).with_fingerprint()
    assert changed.key_for("t") != drafted.key_for("t")
