"""The run store's content key (issue 50): what it covers is listed once in words
(`KEY_COVERS`) and in docs/drift_and_ci.md's store-reuse paragraph, and both match the key; model files
of any format and a task's definition and data change it."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from evals.plan.arm_spec import KEY_COVERS, ArmSpec, model_fingerprint
from evals.runner.task_fingerprint import task_inputs

REPO = Path(__file__).resolve().parents[2]
EMBEDDED = REPO / "tasks" / "embedded"


def _spec(**changes) -> ArmSpec:
    fields = dict(arm="baseline", model="/m", engine={"dtype": "bfloat16"}, env={},
                  tasks=("t",), limit=10, num_fewshot=0, seed=1, include_paths=("/tasks",),
                  output_dir="/out", versions={"vllm": "0.32.0"}, platform={"isa": ["avx2"]})
    return ArmSpec(**{**fields, **changes})


def _everything_set() -> list[ArmSpec]:
    """Specs that between them use every optional part of the key."""
    return [
        _spec(mode="offline", structured_output={"choice": ["a"]}, lora_adapter="/lora",
              adapter_hash="ab", logprobs=5, faults=({"name": "nan", "rate": 0.1},),
              sequential={"chunk": 10, "look": True, "stop_rule": [0.01, 0.02, {}]},
              sampling={"decoding": {"temperature": 0.6}, "repeats": 2, "seed": 1}),
        _spec(mode="server", serving={"concurrency": 4}),
    ]


def _readme_names() -> set[str]:
    text = (REPO / "docs" / "drift_and_ci.md").read_text(encoding="utf-8")
    start = text.index("**Store reuse.**")
    block = text[start:text.index("\n\n", text.index("\n- ", start))]
    names = set()
    for line in block.splitlines():
        if line.startswith("- "):
            names.update(re.findall(r"`([a-z_]+)`", line.split(":")[0]))
    return names


def test_the_readme_and_key_covers_list_exactly_what_the_key_hashes():
    hashed = set().union(*(s.key_parts("t") for s in _everything_set()))
    assert hashed == set(KEY_COVERS)
    assert _readme_names() == set(KEY_COVERS)


@pytest.mark.parametrize("change", [
    {"replicate": 1}, {"task_inputs": {"t": {"config": "x"}}}, {"model_hash": "other"},
    {"engine": {"dtype": "float32"}}, {"env": {"A": "1"}}, {"limit": 11}, {"seed": 2},
    {"num_fewshot": 1}, {"versions": {"vllm": "0.33.0"}}])
def test_each_covered_part_changes_the_key(change):
    assert _spec(**change).key_for("t") != _spec().key_for("t")


def _model(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


@pytest.mark.parametrize("name", ["pytorch_model.bin", "merges.txt", "tokenizer.model",
                                  "vocab.txt", "model.gguf", "sub/pytorch_model.bin"])
def test_every_file_of_a_model_folder_is_in_its_fingerprint(tmp_path, name):
    files = {"config.json": b"{}", name: b"\x00" * 1000}
    a = _model(tmp_path / "a", files)
    b = _model(tmp_path / "b", {**files, name: b"\x00" * 999 + b"\x01"})
    assert model_fingerprint(str(a)) != model_fingerprint(str(b))
    assert model_fingerprint(str(a)) == model_fingerprint(str(_model(tmp_path / "c", files)))


def test_a_large_bin_overwritten_in_place_changes_the_fingerprint(tmp_path):
    """Above the whole-file limit a file is sampled; values changed everywhere (noised
    weights, same size) change it."""
    import numpy as np

    size = 70 * 1024 * 1024
    weights = np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)
    model = _model(tmp_path / "m", {"config.json": b"{}"})
    (model / "pytorch_model.bin").write_bytes(weights.tobytes())
    before = model_fingerprint(str(model))
    (model / "pytorch_model.bin").write_bytes((weights ^ 1).tobytes())
    assert model_fingerprint(str(model)) != before


def test_a_hub_model_is_keyed_by_its_resolved_revision(tmp_path):
    refs = tmp_path / "hub" / "models--org--name" / "refs"
    refs.mkdir(parents=True)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    uncached = model_fingerprint("org/name", env=env)
    (refs / "main").write_text("a" * 40)
    first = model_fingerprint("org/name", env=env)
    (refs / "main").write_text("b" * 40)
    assert len({uncached, first, model_fingerprint("org/name", env=env)}) == 3
    assert model_fingerprint("org/name", "c" * 40, env) != first  # a pinned commit


@pytest.fixture
def tasks(tmp_path) -> Path:
    """A copy of the embedded tasks (their YAML, data_loader.py and data/)."""
    folder = tmp_path / "tasks"
    shutil.copytree(EMBEDDED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _inputs(folder: Path, task: str = "tiny_addition") -> dict:
    return task_inputs([task], [str(folder)])[task]


def test_a_generation_setting_in_the_yaml_changes_the_task_config(tasks):
    before = _inputs(tasks)
    path = tasks / "tiny_addition.yaml"
    path.write_text(path.read_text().replace("max_gen_toks: 8", "max_gen_toks: 1"))
    after = _inputs(tasks)
    assert after["config"] != before["config"] and after["files"] != before["files"]


@pytest.mark.parametrize("name", ["data/addition_test.jsonl", "data_loader.py"])
def test_a_data_file_or_a_function_module_changes_the_task_files(tasks, name):
    before = _inputs(tasks)
    with (tasks / name).open("a", encoding="utf-8") as handle:
        handle.write("\n")
    after = _inputs(tasks)
    assert after["files"] != before["files"] and after["config"] == before["config"]


def test_an_included_yaml_elsewhere_is_hashed_and_a_moved_folder_keeps_its_hashes(tmp_path,
                                                                                  tasks):
    shared = tmp_path / "shared" / "generation.yaml"
    shared.parent.mkdir()
    shared.write_text("generation_kwargs:\n  max_gen_toks: 8\n")
    path = tasks / "tiny_addition.yaml"
    path.write_text(f"include: {shared}\n" + path.read_text().split("generation_kwargs:")[0]
                    + "metadata:\n  version: 1.0\n")
    before = _inputs(tasks)
    moved = tmp_path / "moved"
    shutil.copytree(tasks, moved)
    assert _inputs(moved) == before  # no absolute path of the checkout in the key
    shared.write_text("generation_kwargs:\n  max_gen_toks: 1\n")
    after = _inputs(tasks)
    assert after["config"] != before["config"] and after["files"] != before["files"]


def test_a_hub_dataset_is_keyed_by_its_resolved_revision(tmp_path, monkeypatch):
    folder = tmp_path / "hubtask"
    folder.mkdir()
    (folder / "hub_task.yaml").write_text(
        "task: hub_task\ndataset_path: org/data\noutput_type: generate_until\n"
        "test_split: test\ndoc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    refs = tmp_path / "hub" / "datasets--org--data" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("a" * 40)
    first = _inputs(folder, "hub_task")
    (refs / "main").write_text("b" * 40)
    second = _inputs(folder, "hub_task")
    assert first["data"] != second["data"] and first["config"] == second["config"]


def test_a_group_or_tag_covers_each_of_its_tasks(tasks):
    before = _inputs(tasks, "embedded_tiny")
    path = tasks / "tiny_reviews_mc.yaml"
    path.write_text(path.read_text().replace("- neutral\n", ""))
    assert _inputs(tasks, "embedded_tiny")["config"] != before["config"]


def test_a_replicate_is_part_of_the_spec_on_disk(tmp_path):
    spec = replace(_spec(output_dir=str(tmp_path)), replicate=2,
                   task_inputs={"t": {"config": "c", "files": "f", "data": "d"}})
    (tmp_path / "spec.json").write_text(spec.to_json())
    again = ArmSpec.read(tmp_path / "spec.json")
    assert again == spec and again.key_for("t") == spec.key_for("t")
