"""Benchmark of the statistics layer on a large paired binary comparison.

Analyses 1,000,000 paired 0/1 items across 20 tasks (50,000 each): per task the
exact McNemar test, Tango's non-inferiority test with its 95% interval and a
10,000-resample paired bootstrap; then a bootstrap over all items pooled and Holm's
adjustment across tasks. Prints wall time per step and peak memory.

    /work/venv/bin/python benchmarks/bench_stats.py [--tasks 20] [--items-per-task 50000]

Then the full per-task analysis the gate runs (`evals.analyse.task_analysis.analyse_task` with its
label and length analyses, the bootstrap and the verdict) on classification-like tasks
of the same size, with a reference measured in the same run: scipy's paired t-test on the
same arrays. The last line reads `full analysis, 20 tasks x 50,000 items: 1.23 s`.

Data generation is not timed. Peak memory is reported two ways: the Python-heap
peak during the analysis (tracemalloc, measured in a second, separate run because
tracing slows allocation) and the whole process's maximum resident set size.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evals.analyse.task_analysis import analyse_task  # noqa: E402
from evals.pair.pairing import PairedTask  # noqa: E402
from evals.pair.samples import SampleRecord  # noqa: E402
from evals.decide.verdict import decide  # noqa: E402
from evals.stats import (
    holm,
    mcnemar_exact,
    paired_bootstrap,
    tango_noninferiority,
)


def make_tasks(n_tasks: int, items: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per task: baseline 0/1 scores and a candidate with ~6% of items flipped."""
    rng = np.random.default_rng(seed)
    tasks = []
    for t in range(n_tasks):
        baseline = (rng.random(items) < rng.uniform(0.4, 0.9)).astype(np.float64)
        u = rng.random(items)
        p_loss = 0.03 + 0.002 * (t % 3)  # a few tasks lose slightly more than they gain
        candidate = baseline.copy()
        candidate[(baseline == 1) & (u < p_loss)] = 0.0
        candidate[(baseline == 0) & (u > 1 - 0.03)] = 1.0
        tasks.append((baseline, candidate))
    return tasks


def analyse(tasks, resamples: int, seed: int) -> dict[str, float]:
    """Run the full analysis; returns seconds per step."""
    rng = np.random.default_rng(seed)
    seconds: dict[str, float] = defaultdict(float)
    pvalues = []

    def timed(step, fn, *args, **kwargs):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds[step] += time.perf_counter() - start
        return out

    for baseline, candidate in tasks:
        pvalues.append(timed("McNemar exact (per task)", mcnemar_exact, baseline, candidate).pvalue)
        tango = timed(
            "Tango test (per task)", tango_noninferiority, baseline, candidate, margin=0.02
        )
        timed("Tango 95% interval (per task)", tango.confidence_interval)
        timed(
            f"Bootstrap x{resamples} (per task)",
            paired_bootstrap,
            baseline,
            candidate,
            rng=rng,
            n_resamples=resamples,
        )
    all_base = np.concatenate([b for b, _ in tasks])
    all_cand = np.concatenate([c for _, c in tasks])
    timed(
        f"Bootstrap x{resamples} (all items pooled)",
        paired_bootstrap,
        all_base,
        all_cand,
        rng=rng,
        n_resamples=resamples,
    )
    timed("Holm across tasks", holm, pvalues)
    return dict(seconds)


LABELS = ("positive", "negative", "neutral")


def make_paired_tasks(tasks) -> list[PairedTask]:
    """Classification-like tasks: each 0/1 score becomes a predicted label and a response."""
    paired = []
    for t, (baseline, candidate) in enumerate(tasks):
        n = baseline.size
        targets = [LABELS[i % 3] for i in range(n)]

        def records(scores, targets=targets, t=t):
            out = []
            for i, (target, score) in enumerate(zip(targets, scores)):
                prediction = target if score else LABELS[(i + 1) % 3]
                out.append(SampleRecord(task=f"t{t}", doc_id=i, filter="none",
                                        metrics={"acc": float(score)}, doc_hash="", prompt_hash="",
                                        target=target, prediction=prediction,
                                        response=" " + prediction, prompt=""))
            return tuple(out)

        paired.append(PairedTask(task=f"t{t}", metric="acc", filter="none",
                                 doc_ids=tuple(range(n)), baseline=baseline,
                                 candidate=candidate, baseline_records=records(baseline),
                                 candidate_records=records(candidate)))
    return paired


def full_analysis(paired: list[PairedTask], resamples: int, seed: int) -> float:
    start = time.perf_counter()
    analyses = [analyse_task(p, gated=True, alpha=0.05, margin=0.02, seed=seed,
                             n_resamples=resamples) for p in paired]
    decide(analyses, alpha=0.05, margin=0.02)
    return time.perf_counter() - start


def scipy_reference(paired: list[PairedTask]) -> float:
    from scipy import stats

    start = time.perf_counter()
    for p in paired:
        stats.ttest_rel(p.candidate, p.baseline)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--items-per-task", type=int, default=50_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()

    tasks = make_tasks(args.tasks, args.items_per_task, args.seed)
    total_items = args.tasks * args.items_per_task

    start = time.perf_counter()
    seconds = analyse(tasks, args.resamples, args.seed + 1)
    wall = time.perf_counter() - start

    tracemalloc.start()
    analyse(tasks, args.resamples, args.seed + 1)
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB

    rows = [(step, f"{value:.3f} s") for step, value in seconds.items()]
    rows += [
        ("Total wall time (analysis)", f"{wall:.3f} s"),
        ("Peak Python heap during analysis (tracemalloc)", f"{heap_peak / 2**20:.1f} MiB"),
        ("Max resident set size, whole process", f"{max_rss / 2**20:.1f} MiB"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{total_items:,} paired binary items, {args.tasks} tasks, {args.resamples:,} resamples")
    print(f"{'step'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 12}")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")

    paired = make_paired_tasks(tasks)
    full = min(full_analysis(paired, args.resamples, args.seed) for _ in range(2))
    reference = min(scipy_reference(paired) for _ in range(5))
    print(f"reference: scipy.stats.ttest_rel on the same {args.tasks} tasks: "
          f"{reference * 1000:.1f} ms (full analysis = {full / reference:.0f}x the reference)")
    print(f"full analysis, {args.tasks} tasks x {args.items_per_task:,} items: {full:.2f} s")


if __name__ == "__main__":
    main()
