"""The run store's content key on real engines (issue 50) and a damaged finished arm
(issue 51): an A/A + noise floor run twice against one store keeps its three replicates
apart; an edited task YAML (generation settings only), an edited data file and a `.bin`
model overwritten in place each make both arms run fresh; a finished arm whose samples
file was cut short is repaired by the rerun. Each test has its own store."""

from __future__ import annotations

import json
import shutil

import pytest
from engine_helpers import ENGINE, MODEL, REPO, read_summary, run_cli, write_config

SMALL = 20  # items: enough for an A/B, few engine-seconds
PLAIN = {"engine": {**ENGINE, "enable_prefix_caching": False}}
PREFIX = {"engine": {**ENGINE, "enable_prefix_caching": True}}
ARMS = ("baseline", "candidate", "baseline_rerun")


def _run(config, reports, store) -> tuple:
    result = run_cli("ab", str(config), "--reports", str(reports), "--store", str(store))
    assert result.returncode in (0, 1, 3), result.stdout + result.stderr
    (run_dir,) = [p.parent for p in reports.glob("*/summary.json")]
    return result, run_dir


@pytest.fixture(scope="module")
def aa_twice(tmp_path_factory):
    """An A/A with `noise_floor: true` (three arms of one config), run twice into one store."""
    root = tmp_path_factory.mktemp("aa-twice")
    config = write_config(root, "aa", PLAIN, PLAIN, limit=SMALL, noise_floor=True,
                          expect_identical_arms=True,
                          tasks=[{"name": "tiny_addition", "metric": "exact_match"}])
    first = _run(config, root / "r1", root / "store")
    second = _run(config, root / "r2", root / "store")
    return config, root, first, second


def test_aa_noise_floor_twice_keeps_its_replicates_apart(aa_twice):
    _, root, (r1, run1), (r2, run2) = aa_twice
    assert r1.stdout.count("starting offline model") == 3, r1.stdout
    assert r2.returncode == r1.returncode and "starting" not in r2.stdout, r2.stdout
    summary = read_summary(root / "r2")
    # each replicate from the same replicate of the one earlier run, never the baseline
    assert {arm: summary["arms"][arm]["tasks"]["tiny_addition"]["reused_from"]
            for arm in ARMS} == {arm: str(run1 / "arms" / arm) for arm in ARMS}
    for replicate, arm in enumerate(ARMS):
        record = summary["arms"][arm]["tasks"]["tiny_addition"]
        assert record["outcome"] == "reused" and record["reused_run"] == run1.name
        assert record["ran_in"] == str(run1 / "arms" / arm)
        assert f"replicate {replicate}" in record["reuse_reason"]
        assert summary["arms"][arm]["replicate"] == replicate
        assert f"{arm}: tiny_addition reused from {run1 / 'arms' / arm} (run {run1.name}" \
            in r2.stdout
    first = read_summary(root / "r1")
    assert {first["arms"][a]["tasks"]["tiny_addition"]["outcome"] for a in ARMS} == {"ran"}
    page = (run2 / "report.html").read_text(encoding="utf-8")
    assert "Ran or reused" in page and run1.name in page


def test_a_finished_arm_with_a_cut_samples_file_is_run_again(aa_twice):
    """Issue 51: the rerun does not trust the damaged arm; it names the file and repairs it
    (here from the store's intact copy), and the comparison is as before."""
    config, root, _, (r2, run2) = aa_twice
    (samples,) = (run2 / "arms" / "candidate" / "lm_eval").rglob("samples_tiny_addition_*")
    whole = samples.read_bytes()
    samples.write_bytes(whole[:len(whole) // 2])
    again = run_cli("ab", str(config), "--reports", str(root / "r2"), "--store",
                    str(root / "store"))
    assert again.returncode == r2.returncode, again.stdout + again.stderr
    assert f"candidate: tiny_addition was finished, but {samples}" in again.stdout
    assert "runs again" in again.stdout
    (repaired,) = (run2 / "arms" / "candidate" / "lm_eval").rglob("samples_tiny_addition_*")
    lines = repaired.read_text(encoding="utf-8").splitlines()
    assert len(lines) == SMALL and all(json.loads(line) for line in lines)


def _bin_model(folder):
    """The shipped model with its weights as pytorch_model.bin (no safetensors)."""
    import torch
    from safetensors.torch import load_file

    folder.mkdir()
    for item in MODEL.iterdir():
        if item.is_file() and item.suffix != ".safetensors":
            shutil.copy2(item, folder / item.name)
    tensors = load_file(str(MODEL / "model.safetensors"))
    torch.save(tensors, folder / "pytorch_model.bin")
    return folder, tensors


def _fresh_both(result) -> None:
    out = result.stdout
    assert "reused" not in out, out
    assert "baseline: starting" in out and "candidate: starting" in out, out


def test_edited_task_yaml_data_file_and_bin_model_each_run_fresh(tmp_path):
    """Never a stored arm beside a fresh one: each edit misses for both arms."""
    import torch

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copytree(REPO / "tasks" / "embedded" / "data", tasks / "data")
    shutil.copy2(REPO / "tasks" / "embedded" / "data_loader.py", tasks)
    yaml_path = tasks / "probe_add.yaml"
    text = (REPO / "tasks" / "embedded" / "tiny_addition.yaml").read_text(encoding="utf-8")
    yaml_path.write_text(text.replace("task: tiny_addition", "task: probe_add")
                         .replace("tag:\n- embedded_tiny\n", ""), encoding="utf-8")
    model, tensors = _bin_model(tmp_path / "model-bin")
    config = write_config(tmp_path, "probe", PLAIN, PREFIX, limit=SMALL,
                          include_path=str(tasks), model=str(model),
                          tasks=[{"name": "probe_add", "metric": "exact_match"}])
    store = tmp_path / "store"
    first, _ = _run(config, tmp_path / "r1", store)
    _fresh_both(first)
    assert read_summary(tmp_path / "r1")["tasks"][0]["baseline_mean"] > 0.5

    # generation settings only: the prompt, the data and the targets are unchanged
    yaml_path.write_text(yaml_path.read_text(encoding="utf-8")
                         .replace("max_gen_toks: 8", "max_gen_toks: 1"), encoding="utf-8")
    edited, _ = _run(config, tmp_path / "r2", store)
    _fresh_both(edited)
    task = read_summary(tmp_path / "r2")["tasks"][0]
    assert task["baseline_mean"] == task["candidate_mean"] == 0.0  # 1 token: no sum fits

    data = tasks / "data" / "addition_test.jsonl"
    rows = data.read_text(encoding="utf-8").splitlines()
    first_row = json.loads(rows[0])
    rows[0] = json.dumps({**first_row, "answer": str(int(first_row["answer"]) + 1)})
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    _fresh_both(_run(config, tmp_path / "r3", store)[0])

    generator = torch.Generator().manual_seed(0)
    noised = {name: (t.float() + 0.6 * float(t.float().std())
                     * torch.randn(t.shape, generator=generator)).to(t.dtype)
              if name.endswith("proj.weight") else t for name, t in tensors.items()}
    torch.save(noised, model / "pytorch_model.bin")  # in place, same names and shapes
    _fresh_both(_run(config, tmp_path / "r4", store)[0])
