"""A sequential run's chunks merge into one ordinary lm-eval output directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evals.runner.chunk_merge import merge_chunk_samples
from evals.runner.layout import ArmLayout
from evals.pair.samples import read_output_dir

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_run" / "models__tiny-reviews"
TASK = "tiny_reviews_gen"


def _split_into_chunks(layout: ArmLayout, sizes: list[int]) -> list[dict]:
    (samples_file,) = RUN.glob(f"samples_{TASK}_*.jsonl")
    (results_file,) = RUN.glob("results_*.json")
    rows = [json.loads(x) for x in samples_file.read_text(encoding="utf-8").splitlines() if x]
    start = 0
    for k, size in enumerate(sizes):
        out = layout.chunk_dir(TASK, k) / "models__tiny-reviews"
        out.mkdir(parents=True)
        stamp = f"2026-11-30T03-00-{k:02d}.000000"
        part = rows[start:start + size]
        (out / f"samples_{TASK}_{stamp}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
        shutil.copy(results_file, out / f"results_{stamp}.json")
        start += size
    return rows


def test_merged_chunks_read_as_one_run_with_recomputed_aggregates(tmp_path):
    layout = ArmLayout(tmp_path / "arm")
    rows = _split_into_chunks(layout, [10, 10, 10])
    merge_chunk_samples(layout, TASK, 2)
    merged = read_output_dir(layout.lm_eval_dir, [TASK])
    assert sorted(r.doc_id for r in merged.records) == sorted(r["doc_id"] for r in rows[:20])
    merged_path = merge_chunk_samples(layout, TASK, 3)  # the next look rewrites the merge
    again = read_output_dir(layout.lm_eval_dir, [TASK])
    assert len(again.records) == 30 and len(list(merged_path.parent.glob("samples_*"))) == 1
    (results,) = layout.lm_eval_dir.rglob("results_*.json")
    data = json.loads(results.read_text(encoding="utf-8"))
    expected = sum(r["exact_match"] for r in rows[:30]) / 30
    assert abs(data["results"][TASK]["exact_match,strip"] - expected) < 1e-12
    assert data["n-samples"][TASK]["effective"] == 30
    assert again.task_hashes == read_output_dir(RUN.parent, [TASK]).task_hashes
