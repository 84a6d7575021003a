"""The pair and analyse stages of one comparison: every task's paired items and analysis
(with the A/A noise floor of a baseline rerun, the sequential looks, the clusters), a
cache-stress arm's warm pass against its cold one, and each task's distribution shift."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from evals.analyse.task_analysis import TaskAnalysis, analyse_task, noise_floor, task_rng
from evals.analyse.repeats_analysis import analyse_repeats
from evals.stats.intervals import interval_level
from evals.analyse.cache_stress import WARM_SUFFIX, WarmColdCheck, describe, warm_vs_cold
from evals.analyse.early_stop import first_items, sequential_for_task
from evals.analyse.shift import ShiftAnalysis, analyse_shift
from evals.analyse.task_warnings import task_warnings
from evals.pair.clusters import cluster_ids
from evals.pair.logprobs import TaskLogprobs
from evals.pair.metric_scale import pair_normalised
from evals.pair.pairing import PairedTask, pair_task
from evals.pair.repeats import RepeatScores, pair_repeats, with_rates
from evals.pair.samples import ArmSamples
from evals.paths import ARMS
from evals.plan.config import GateConfig, TaskSpec
from evals.plan.schedule import item_order
from evals.dispatch.arm_origins import RERUN, same_engine_run
from evals.errors import UserError

WARM = "_warm"  # samples[<arm>_warm]: a cache-stress arm's warm pass


@dataclass(frozen=True)
class Analysed:
    """A comparison after the pair and analyse stages."""

    paired: list[PairedTask]
    analyses: list[TaskAnalysis]
    cache_checks: list[WarmColdCheck]
    warnings: list[str]
    shifts: list[ShiftAnalysis] = field(default_factory=list)
    shift_notes: dict[str, str] = field(default_factory=dict)
    """Why a task has no shift analysis."""


def pair_and_analyse(run_dir: Path, tasks: list[TaskSpec], gate: GateConfig, seed: int,
                     samples: dict[str, ArmSamples], sequential: dict | None = None,
                     logprobs: dict[str, dict[str, TaskLogprobs]] | None = None,
                     manifests: dict[str, dict] | None = None,
                     repeats: dict[str, dict[str, RepeatScores]] | None = None) -> Analysed:
    """Every task's paired items and analysis (plus a cache-stress arm's warm pass), and
    its distribution shift (evals.analyse.shift). With the arms' `manifests`, two arms
    whose results for a task are one engine run (reused from one stored arm) are refused:
    the A/A difference, the noise floor and the shift test would be zero by construction.
    With each arm's `repeats` (evals.pair.repeats, `repeats: k`), a sampled task is decided
    on its per-item pass rates (evals.analyse.repeats_analysis)."""
    logprobs = logprobs or {}
    shifts: list[ShiftAnalysis] = []
    shift_notes: dict[str, str] = {}
    paired: list[PairedTask] = []
    analyses: list[TaskAnalysis] = []
    warnings: list[str] = []
    cache_checks: list[WarmColdCheck] = []
    for spec in tasks:
        shared = same_engine_run(manifests or {}, spec.name, ("baseline", "candidate", RERUN))
        if shared:
            raise UserError(f"{run_dir.name}: task `{spec.name}`: {shared}: one engine run "
                            "stands for two replicates, so their differences, the noise floor "
                            "and the shift test would be zero by construction; run again with "
                            "--fresh.")

        def pair(first: str, second: str, filter_name, spec=spec, **kwargs) -> PairedTask:
            return pair_normalised(spec, samples[first], samples[second], filter_name,
                                   run_dir.name, **kwargs)

        p = pair("baseline", "candidate", spec.filter, baseline_superset=sequential is not None)
        paired.append(p)
        looks = None
        if sequential is not None:
            n_items = sequential["n_items"][spec.name]
            order = item_order(n_items, seed, spec.name)
            looks = sequential.get("looks", {}).get(spec.name)
            if looks is None or looks.items_used != p.n:  # e.g. resumed: no live look
                looks = sequential_for_task(p, order, chunk=sequential["chunk"],
                                            alpha=sequential["alpha"], margin=gate.margin,
                                            n_items=n_items)
            p = paired[-1] = first_items(p, order, looks.items_used)
        noise = rerun = None
        if RERUN in samples:
            rerun = pair_task(samples["baseline"], samples[RERUN], spec.name, spec.metric,
                              p.filter)  # both ran the full item set
            noise = noise_floor(rerun)
        shift = analyse_shift(
            p, baseline=logprobs.get("baseline", {}).get(spec.name),
            candidate=logprobs.get("candidate", {}).get(spec.name),
            rerun=logprobs.get(RERUN, {}).get(spec.name), rerun_paired=rerun,
            seed_rng=task_rng(seed, spec.name + ":shift"), margin=gate.shift_margin,
            confidence_level=interval_level(gate.alpha))
        if isinstance(shift, str):
            shift_notes[spec.name] = shift
        else:
            shifts.append(shift)
        clusters = cluster_ids(p, spec.cluster, str(run_dir.name)) if spec.cluster else None
        reps = pair_repeats(p, *((repeats or {}).get(arm, {}).get(spec.name) for arm in ARMS),
                            run_dir.name)
        if reps is not None:  # sampled: decided on the per-item pass rates
            analyses.append(analyse_repeats(p, reps, gated=spec.gate, alpha=gate.alpha,
                                            margin=gate.margin, seed=seed,
                                            n_resamples=gate.bootstrap_resamples, noise=noise))
            p = paired[-1] = with_rates(p, reps)
        else:
            analyses.append(analyse_task(p, gated=spec.gate, alpha=gate.alpha,
                                         margin=gate.margin, seed=seed,
                                         n_resamples=gate.bootstrap_resamples, noise=noise,
                                         sequential=looks, clusters=clusters))
        for arm in ARMS:
            if arm + WARM not in samples:
                continue
            cold_warm = pair(arm, arm + WARM, p.filter)
            check = warm_vs_cold(arm, cold_warm)
            cache_checks.append(check)
            if check.outputs_changed:
                warnings.append(describe(check))
            if arm == "candidate":
                warm = replace(pair("baseline", arm + WARM, p.filter),
                               task=spec.name + WARM_SUFFIX)
                paired.append(warm)
                analyses.append(analyse_task(
                    warm, gated=spec.gate, alpha=gate.alpha, margin=gate.margin, seed=seed,
                    n_resamples=gate.bootstrap_resamples))
        hb = samples["baseline"].task_hashes.get(spec.name)
        hc = samples["candidate"].task_hashes.get(spec.name)
        if hb and hc and hb != hc:
            warnings.append(f"task {spec.name}: lm-eval task hashes differ between arms "
                            f"({hb[:12]} vs {hc[:12]})")
    warnings.extend(task_warnings(analyses))
    return Analysed(paired, analyses, cache_checks, warnings, shifts, shift_notes)
