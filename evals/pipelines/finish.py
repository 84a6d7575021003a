"""The end every comparison shares: pair the items, analyse each task, decide (the
statistical gate, then the gate list), record (summary.json, paired_items.jsonl) and
report. `ab`, `drift`, `compare` and each comparison of a study end here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evals.analyse.comparison_analysis import Analysed, pair_and_analyse
from evals.analyse.exercise import ExerciseReport
from evals.analyse.load_curve import LoadCurve
from evals.analyse.repeats_analysis import distribution_changes
from evals.analyse.shift import adjust, shifted
from evals.decide.drift import DriftInput
from evals.decide.run_decision import decide_run
from evals.pair.logprobs import TaskLogprobs
from evals.pair.repeats import RepeatScores
from evals.pair.samples import ArmSamples
from evals.plan.config import GateConfig, TaskSpec
from evals.record.platform_record import platform_warnings, run_platform
from evals.record.load_curve_record import load_curve_record
from evals.record.run_record import build_summary, shift_record, write_run
from evals.record.run_record_model import RunRecord
from evals.report.terminal_table import render_table
from evals.text_hygiene import visible


@dataclass(frozen=True)
class RunEvidence:
    """What the run stage found besides the items: it feeds the gates and the summary."""

    sequential: dict | None = None
    speed: dict[str, dict] | None = None
    exercise: ExerciseReport | None = None
    preflight: dict | None = None
    drift: DriftInput | None = None
    logprobs: dict[str, dict[str, TaskLogprobs]] | None = None
    """Each arm's per-token top-k log-probabilities, by task (`logprobs: k`)."""
    load_curve: LoadCurve | None = None
    """Both server arms' load sweep (`speed:`), analysed."""
    repeats: dict[str, dict[str, RepeatScores]] | None = None
    """Each arm's scored repeats, by task (`repeats: k`)."""


def finish(*, kind: str, run_dir: Path, tasks: list[TaskSpec], gate: GateConfig, seed: int,
           config_dump: dict, samples: dict[str, ArmSamples], manifests: dict[str, dict],
           echo=print, evidence: RunEvidence | None = None, analysed: Analysed | None = None,
           study_adjusted: dict[str, float] | None = None, run_id: str | None = None
           ) -> RunRecord:
    """Pair, analyse, decide, record and report one run; its record (whose `exit_code` is
    its verdict's).

    A study passes each comparison `analysed` already, and its tasks' regression p-values
    adjusted over the whole study (`study_adjusted`, evals.decide.verdict.study_family),
    and the comparison's `run_id` (default: the run directory's name)."""
    evidence = evidence or RunEvidence()
    if analysed is None:
        analysed = pair_and_analyse(run_dir, tasks, gate, seed, samples, evidence.sequential,
                                    evidence.logprobs, manifests, evidence.repeats)
    shifts = adjust(analysed.shifts, gate.alpha)
    gated = {t.name for t in tasks if t.gate}
    shifted_tasks = [(s.task, s.pvalue_adjusted) for s in shifts
                     if s.task in gated and shifted(s, gate.alpha)]
    paired, analyses, cache_checks = analysed.paired, analysed.analyses, analysed.cache_checks
    warnings = list((evidence.preflight or {}).get("warnings", [])) + analysed.warnings
    answer_changes = distribution_changes(analyses, gate.alpha)
    verdict, steps, extras = decide_run(
        analyses, gate, seed, manifests, run_id=run_dir.name, speed=evidence.speed,
        exercise=evidence.exercise, drift=evidence.drift, study_adjusted=study_adjusted,
        shifted_tasks=shifted_tasks, load_curve=evidence.load_curve,
        answer_changes=answer_changes)
    if gate.logprob == "warn":
        regressed = {t.task for t in verdict.tasks if t.verdict.value == "REGRESSION"}
        warnings.extend(
            f"task {task}: the token distributions shifted beyond the A/A noise floor by more "
            f"than gate.shift_margin = {gate.shift_margin:g} nats per item (Holm p={p:.2g}) - "
            "accuracy does not show it (gate.logprob: warn)"
            for task, p in shifted_tasks if task not in regressed)
    if gate.answer_distribution == "warn":
        regressed = {t.task for t in verdict.tasks if t.verdict.value == "REGRESSION"}
        warnings.extend(
            f"task {task}: the arms sample different answers (answer-distribution check over "
            f"the repeats, Holm p={p:.2g}) - the pass rates do not show it "
            "(gate.answer_distribution: warn)"
            for task, p in answer_changes if task not in regressed)
    if evidence.exercise is not None:
        warnings.extend(evidence.exercise.warnings)
    platform = run_platform(kind, manifests)
    warnings.extend(platform_warnings(manifests))
    speedup = extras.pop("speed", None)
    summary = build_summary(
        kind=kind, run_id=run_id or run_dir.name, config=config_dump, analyses=analyses, verdict=verdict,
        arms=manifests, sources={name: s.source for name, s in samples.items()},
        warnings=warnings, speed=speedup, cache_stress=cache_checks, platform=platform,
        drift=extras.get("drift"), gates=steps,
        exercise=evidence.exercise.to_dict() if evidence.exercise is not None else None,
        faults={arm: m["faults"] for arm, m in manifests.items() if m.get("faults")},
        preflight=({k: v for k, v in evidence.preflight.items() if k != "warnings"}
                   if evidence.preflight else None),
        shift={"gate": gate.logprob, "alpha": gate.alpha,
               "tasks": [shift_record(s) for s in shifts], "notes": analysed.shift_notes},
        load_curve=(load_curve_record(evidence.load_curve, extras.get("load_gate"))
                    if evidence.load_curve is not None else None))
    write_run(run_dir, summary, paired)
    from evals.report import write_reports  # rendering is the last step of the flow
    written = write_reports(run_dir)
    echo(render_table(summary))
    for warning in warnings:
        echo(visible(f"warning: {warning}"))
    echo(f"report: {written['html']}")
    return summary
