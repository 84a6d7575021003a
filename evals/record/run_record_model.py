"""`RunRecord`: one comparison's result as a typed, versioned model (summary.json).

The pipeline builds it once (evals.record.run_record.build_summary), writes it once
(`write_run`) and reads it back through one reader (`read_run_record`), which migrates an
older summary.json (evals.schemas.SUMMARY) and refuses a newer one; the reports, the
CI outputs, the canary and studies take this model, as inspect_ai's viewer takes its
`EvalLog`. `model_dump()` gives the exact summary.json layout: a record holds the keys it
was given (the builder gives every key it always writes and the optional parts the run has;
a record read from disk holds what the file held), so a summary reads and writes back as it
was.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, JsonValue

from evals.record.arm_record import ArmRecord
from evals.record.drift_record import DriftRecord
from evals.record.load_curve_record import LoadCurveRecord
from evals.record.run_parts import (ArmFaults, CacheStressRecord, ExerciseRecord,
                                    PlatformRecord, PooledRecord, SpeedRecord)
from evals.record.preflight_record import PreflightRecord
from evals.record.shift_record import ShiftRecord
from evals.record.stored import RECORD_CONFIG, StoredRecord
from evals.record.task_parts import (AnswerDistributionRecord, LabelsRecord, LengthsRecord,
                                     RepeatsRecord, SequentialRecord)
from evals.schemas import SUMMARY

__all__ = ["GateRecord", "GateStepRecord", "RunRecord", "StoredRecord", "TaskRecord"]

_CONFIG = RECORD_CONFIG


class GateRecord(BaseModel):
    """The statistical gate the verdict was decided with."""

    model_config = _CONFIG

    alpha: float = Field(description="One-sided significance level of the tests.")
    margin: float = Field(description="Non-inferiority margin, as a share (0.03 = 3 points).")
    correction: str = Field(description="Multiple-testing correction over the gated tasks.")


class TaskRecord(StoredRecord):
    """One task's paired analysis (evals.analyse.task_analysis.TaskAnalysis) and its verdict.

    A summary written before a field existed reads it as None (and writes it back without
    it)."""

    model_config = _CONFIG

    task: str = Field(description="The lm-eval task name.")
    metric: str | None = Field(None, description="The metric compared, e.g. exact_match.")
    filter: str | None = Field(None, description="The lm-eval filter whose scores are compared.")
    gated: bool = Field(description="Whether the task's verdict counts for the run's.")
    n: int | None = Field(None, description="Paired items compared.")
    binary: bool | None = Field(None, description="Whether every score is 0 or 1.")
    baseline_mean: float | None = Field(None, description="The baseline arm's mean score.")
    candidate_mean: float | None = Field(None, description="The candidate arm's mean score.")
    delta: float | None = Field(None, description="candidate_mean - baseline_mean.")
    ci_low: float | None = Field(None, description="Lower end of the delta's interval.")
    ci_high: float | None = Field(None, description="Upper end of the delta's interval.")
    ci_method: str | None = Field(None, description="How the interval was computed.")
    regression_pvalue: float | None = Field(None, description="p-value of 'the candidate is "
                                                              "worse'.")
    regression_test: str | None = Field(None, description="The test behind regression_pvalue.")
    noninferiority_pvalue: float | None = Field(None, description="p-value of 'worse by more "
                                                                  "than the margin'.")
    noninferiority_test: str | None = Field(None, description="The test behind "
                                                              "noninferiority_pvalue.")
    correct_to_wrong: int | None = Field(None, description="Items right in the baseline, "
                                                           "wrong in the candidate.")
    wrong_to_correct: int | None = Field(None, description="Items wrong in the baseline, "
                                                           "right in the candidate.")
    flip_rate: float | None = Field(None, description="Share of items whose score changed.")
    mde: float | None = Field(None, description="Minimum detectable effect at this n.")
    mde_note: str | None = Field(None, description="Why there is no mde, when there is none.")
    bootstrap_low: float | None = Field(None, description="Lower end of the paired "
                                                          "bootstrap interval.")
    bootstrap_high: float | None = Field(None, description="Upper end of the paired "
                                                           "bootstrap interval.")
    degenerate: str | None = Field(None, description="Why the tests could not run, if so.")
    labels: LabelsRecord | None = Field(None, description="Per-label confusion "
                                          "(evals.analyse.task_analysis.LabelAnalysis).")
    lengths: LengthsRecord | None = Field(None, description="Response lengths "
                                           "(evals.analyse.task_analysis.LengthAnalysis).")
    noise_flip_rate: float | None = Field(None, description="Flip rate between two baseline "
                                                            "runs (A/A), if run.")
    noise_flips: int | None = Field(None, description="Flips between two baseline runs.")
    sequential: SequentialRecord | None = Field(None, description="Interim looks of a "
                                              "sequential run (SequentialSummary).")
    clusters: int | None = Field(None, description="Clusters of a clustered task.")
    design_effect: float | None = Field(None, description="Variance inflation from the "
                                                          "clustering.")
    repeats: RepeatsRecord | None = Field(None, description="A sampled task (`repeats: k`): "
                                           "k, the rate test's method and the items whose "
                                           "pass rate fell or rose "
                                           "(evals.analyse.repeats_analysis.RepeatsSummary).")
    answer_distribution: AnswerDistributionRecord | None = Field(
        None, description="A sampled task's answer-distribution check: statistic, p-value, "
        "informative items and the items that moved most "
        "(evals.analyse.repeats_analysis.AnswerDistribution).")
    verdict: str = Field(description="PASS, REGRESSION or INCONCLUSIVE for this task.")
    regression_pvalue_adjusted: float | None = Field(None, description="regression_pvalue "
                                                     "after the run's correction.")
    reason: str | None = Field(None, description="The task verdict in one sentence.")


class GateStepRecord(BaseModel):
    """One gate the verdict passed through (evals.decide.gates.GateStep)."""

    model_config = _CONFIG

    gate: str = Field(description="The gate's name; the statistical one comes first.")
    verdict: str = Field(description="The verdict after this gate.")
    changed: bool = Field(description="Whether this gate changed the verdict or its reason.")


class RunRecord(StoredRecord):
    """One comparison's result: summary.json."""

    model_config = _CONFIG

    schema_version: int = Field(SUMMARY.version, description="Layout version of this record.")
    kind: str = Field(description="What made the run: ab, compare, drift or study.")
    run_id: str = Field(description="The run's id, its directory name under reports/.")
    created: str = Field(description="When the record was built (UTC, ISO 8601).")
    suite_version: str = Field(description="vllm-regression-evals version that built it.")
    platform: PlatformRecord | None = Field(None, description="The machine the arms ran on "
                                            "(evals.record.platform_record), if known.")
    verdict: Literal["PASS", "REGRESSION", "INCONCLUSIVE"] = Field(
        description="The run's verdict (evals.decide.verdict.Verdict).")
    exit_code: int = Field(description="The process exit code of the verdict.")
    reason: str = Field(description="The verdict in one sentence.")
    gate: GateRecord = Field(description="The statistical gate used.")
    tasks: list[TaskRecord] = Field(description="Every task's analysis and verdict.")
    arms: dict[str, ArmRecord] = Field(description=(
        "Each arm's manifest (engine config, timings, versions, its `replicate`) and per task "
        "(`tasks.<task>`) its record: `outcome` ran or reused, for a reused one the run "
        "(`reused_run`) and arm directory (`reused_from`) it came from and why its key matched "
        "(`reuse_reason`), and where its engine run was (`ran_in`)."))
    sources: dict[str, str] = Field(description="Where each arm's samples came from.")
    config: dict[str, JsonValue] = Field(description="The run's configuration as given "
                                         "(JSON values, in the order given).")
    warnings: list[str] = Field(description="Things a reader of the verdict should know.")
    speed: SpeedRecord | None = Field(None, description="The speed analysis of an A/B run "
                                         "(evals.analyse.speed), if measured.")
    cache_stress: list[CacheStressRecord] = Field([], description="Warm-versus-cold cache "
                                                               "checks.")
    pooled: PooledRecord | None = Field(None, description="The pooled verdict over tasks, "
                                                            "if any.")
    drift: DriftRecord | None = Field(None, description="A drift run's control charts.")
    gates: list[GateStepRecord] | None = Field(None, description="The gate steps in order.")
    exercise: ExerciseRecord | None = Field(None, description="Whether the declared "
                                            "optimizations were exercised.")
    faults: dict[str, ArmFaults] | None = Field(None, description="Canary faults fired, per arm.")
    preflight: PreflightRecord | None = Field(None, description="The doctor and the audit.")
    shift: ShiftRecord | None = Field(None, description="Distribution-shift analyses.")
    load_curve: LoadCurveRecord | None = Field(None, description="The load sweep of both "
                                               "server arms (evals.analyse.load_curve), if run.")
