"""False alarms of the sampled gate on recorded samples (issue 53's Done-when): the
sampled A/A (configs/cpu/sampled_aa.yaml) run under several `seed:` values gives, per
item, the baseline's k repeats under each seed - distinct-seed samples of one engine. Their
pool feeds `evals.stats.aa_resampling.aa_resampled_false_alarms` (both the rate test and
the answer-distribution check on >= 200 A/As resampled from it), per task, and the runs'
own verdicts are listed beside it.

python benchmarks/bench_sampled_aa.py RUN_DIR [RUN_DIR ...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from evals.pair.repeats import read_arm_repeats
from evals.record.run_record import read_run_record
from evals.stats.aa_resampling import aa_resampled_false_alarms

N_AAS = 200


def pooled(runs: list[Path], task: str) -> tuple[np.ndarray, list[list[str]], str, str]:
    """(n_items, runs x k) outcomes and answers of the baseline's repeats over the runs."""
    outcomes: dict[int, list[float]] = {}
    answers: dict[int, list[str]] = {}
    metric = filter_name = ""
    for run in runs:
        summary = read_run_record(run)
        (row,) = [t for t in summary.tasks if t.task == task]
        metric, filter_name = row.metric, row.filter
        scores = read_arm_repeats(run / "arms" / "baseline", [task])[task]
        for doc_id, item in scores.items.items():
            outcomes.setdefault(doc_id, []).extend(item["scores"][filter_name][metric])
            answers.setdefault(doc_id, []).extend(item["answers"][filter_name])
    docs = sorted(outcomes)
    return (np.asarray([outcomes[d] for d in docs]), [answers[d] for d in docs], metric,
            filter_name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    first = read_run_record(args.runs[0])
    repeats = first.tasks[0].repeats.repeats
    report = {"runs": [], "tasks": {}}
    for run in args.runs:
        summary = read_run_record(run)
        report["runs"].append({
            "run": run.name, "seed": summary.config.get("seed"), "verdict": summary.verdict,
            "tasks": {t.task: {"verdict": t.verdict, "delta": t.delta,
                               "p_drop_adjusted": t.regression_pvalue_adjusted,
                               "answer_distribution_p": (t.answer_distribution.pvalue
                                                         if t.answer_distribution else None)}
                     for t in summary.tasks}})
    for task in [t.task for t in first.tasks]:
        outcomes, answers, metric, filter_name = pooled(args.runs, task)
        result = aa_resampled_false_alarms(outcomes, answers, repeats=repeats,
                                           margin=first.gate.margin, n_aas=N_AAS,
                                           alpha=first.gate.alpha, seed=0)
        report["tasks"][task] = {
            "metric": metric, "filter": filter_name, "items": int(outcomes.shape[0]),
            "pool_per_item": result.pool_size, "repeats_per_arm": repeats, "n_aas": N_AAS,
            "alpha": result.alpha, "limit_alpha_plus_2se": round(result.limit, 4),
            "rate_false_alarms": result.rate_false_alarms,
            "distribution_false_alarms": result.distribution_false_alarms,
            "within_limit": result.within_limit, "pass_rate": float(outcomes.mean())}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
