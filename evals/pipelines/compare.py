"""`python -m evals compare DIR_A DIR_B`: two existing lm-eval `--log_samples` directories
(baseline first) are paired, analysed, decided, recorded and reported; no run stage."""

from __future__ import annotations

import hashlib
from pathlib import Path

from evals.errors import ExitCode, UserError
from evals.pair.samples import default_metric, outputs_digest, read_output_dir
from evals.paths import REPORTS_DIR
from evals.pipelines.finish import RunEvidence, finish
from evals.plan.config import DEFAULT_SEED, GateConfig, TaskSpec
from evals.store import open_store, record_in_store


def metric_of(named: str | None) -> str | None:
    """`--metric TASK=METRIC[,FILTER]` (lm-eval's own `metric,filter` naming): the metric."""
    return named.partition(",")[0] if named else None


def filter_of(named: str | None) -> str | None:
    """... and the filter gated on, when named (a task logged with several needs one)."""
    return (named.partition(",")[2] or None) if named else None


def run_compare(dir_a: Path, dir_b: Path, *, gate: GateConfig, seed: int = DEFAULT_SEED,
                metrics: dict[str, str] | None = None, reports_dir: Path = REPORTS_DIR,
                echo=print, store_root: Path | None = None,
                clusters: dict[str, str] | None = None, name: str = "compare",
                deployment: str | None = None) -> tuple[ExitCode, Path]:
    """Analyses two existing lm-eval --log_samples directories (baseline first).

    `name`: the run id's prefix; `deployment`: what the run store charts it under
    (default: one deployment per pair of paths, so unrelated comparisons never share a
    trend chart)."""
    a, b = read_output_dir(dir_a), read_output_dir(dir_b)
    same_dir = Path(dir_a).resolve() == Path(dir_b).resolve()
    common = sorted(set(a.tasks()) & set(b.tasks()))
    if not common:
        raise UserError(f"{dir_a} and {dir_b} share no task (baseline has "
                        f"{', '.join(a.tasks())}; candidate has {', '.join(b.tasks())}).")
    only = sorted(set(a.tasks()) ^ set(b.tasks()))
    if only:
        raise UserError(f"task(s) {', '.join(only)} are in only one of {dir_a} and {dir_b}; "
                        "compare directories that ran the same tasks.")
    paths_key = hashlib.sha256(
        f"{Path(dir_a).resolve()}|{Path(dir_b).resolve()}".encode()).hexdigest()[:8]
    # the id covers the files' content, so a rerun on changed outputs is a new run (the old
    # one, possibly a pinned golden run, keeps its meaning); the same content, the same id
    run_dir = Path(reports_dir) / f"{name}-{outputs_digest(dir_a, dir_b)}"
    manifests = {"baseline": {"source": str(dir_a), "lm_eval_config": a.lm_eval_config},
                 "candidate": {"source": str(dir_b), "lm_eval_config": b.lm_eval_config}}
    metrics = metrics or {}
    clusters = clusters or {}
    for flag, named in (("--metric", metrics), ("--cluster", clusters)):
        unknown = sorted(set(named) - set(common))
        if unknown:
            raise UserError(f"{flag} names task(s) {', '.join(unknown)} that the directories "
                            f"do not hold (they hold {', '.join(common)}).")
    tasks = [TaskSpec(name=t, metric=metric_of(metrics.get(t)) or default_metric(a, t),
                      filter=filter_of(metrics.get(t)), cluster=clusters.get(t))
             for t in common]
    config_dump = {"baseline_dir": str(dir_a), "candidate_dir": str(dir_b), "seed": seed,
                   "gate": gate.model_dump(), "tasks": [t.model_dump() for t in tasks]}
    preflight = {"warnings": [f"baseline and candidate are the same directory ({dir_a}): this "
                              "compares a run with itself"]} if same_dir else None
    record = finish(kind="compare", run_dir=run_dir, tasks=tasks, gate=gate, seed=seed,
                    config_dump=config_dump, samples={"baseline": a, "candidate": b},
                    manifests=manifests, echo=echo, evidence=RunEvidence(preflight=preflight))
    record_in_store(open_store(reports_dir, store_root), run_dir, kind="compare",
                    deployment=deployment or f"{name}-{paths_key}", echo=echo)
    return ExitCode(record.exit_code), run_dir
