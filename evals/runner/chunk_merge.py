"""Merging a sequential run's per-chunk lm-eval outputs into one lm-eval output directory.

Each chunk is one lm-eval run over some of a task's items, saved under
`<arm>/chunks/<task>/<k>/`. After every chunk the finished chunks are merged into
`<arm>/lm_eval/<model>/`: one `samples_<task>_<stamp>.jsonl` with every item run so far
and a `results_<stamp>.json` whose aggregate metrics are recomputed over those items.
Readers downstream see an ordinary lm-eval `--log_samples` directory.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from pathlib import Path

from evals.runner.layout import ArmLayout

_MERGED_NOTE = "merged by evals from sequential chunks"


def _only(paths: list[Path], what: str, where: Path) -> Path:
    if len(paths) != 1:
        raise RuntimeError(f"{where}: expected one {what}, found {len(paths)}")
    return paths[0]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def merge_chunk_samples(layout: ArmLayout, task: str, n_chunks: int) -> Path:
    """Merges chunks 0..n_chunks-1 of `task`; returns the merged samples file."""
    lines: list[str] = []
    first_results: dict | None = None
    model_dir_name = stamp = ""
    for k in range(n_chunks):
        chunk = layout.chunk_dir(task, k)
        samples = _only(sorted(chunk.rglob(f"samples_{task}_*.jsonl")), "samples file", chunk)
        results = _only(sorted(chunk.rglob("results_*.json")), "results file", chunk)
        if k == 0:
            model_dir_name = samples.parent.name
            stamp = samples.name.removeprefix(f"samples_{task}_").removesuffix(".jsonl")
            first_results = json.loads(results.read_text(encoding="utf-8"))
        lines.extend(line for line in samples.read_text(encoding="utf-8").splitlines()
                     if line.strip())
    target_dir = layout.lm_eval_dir / model_dir_name
    target_dir.mkdir(parents=True, exist_ok=True)
    merged = target_dir / f"samples_{task}_{stamp}.jsonl"
    _write_atomic(merged, "\n".join(lines) + "\n")
    assert first_results is not None
    first_results["results"] = {task: _aggregate(lines, task)}
    first_results["n-samples"] = {task: {"original": first_results.get("n-samples", {}).get(
        task, {}).get("original"), "effective": len({json.loads(x)["doc_id"] for x in lines})}}
    first_results["evals_note"] = _MERGED_NOTE
    _write_atomic(target_dir / f"results_{stamp}.json", json.dumps(first_results, indent=2,
                                                                    default=str))
    return merged


def _aggregate(lines: list[str], task: str) -> dict:
    """Mean of every per-item metric, per filter, over the merged items."""
    sums: dict[str, list[float]] = defaultdict(list)
    for line in lines:
        raw = json.loads(line)
        for name in raw.get("metrics", []):
            value = raw.get(name)
            if isinstance(value, (int, float)) and not math.isnan(float(value)):
                sums[f"{name},{raw.get('filter', 'none')}"].append(float(value))
    out: dict = {"alias": task}
    out.update({key: sum(v) / len(v) for key, v in sums.items()})
    return out
