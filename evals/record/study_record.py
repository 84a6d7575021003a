"""`StudyRecord`: a study's result as a typed, versioned model (study.json), with its one
reader `read_study_record`.

The study pipeline (evals.pipelines.study) builds it with `build_study_record`; the study
page, the terminal matrix, the CI outputs and `gate-config` take it. Like RunRecord it
dumps the keys it was given, so study.json keeps its layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from evals.decide.outcome import Verdict
from evals.errors import ExitCode
from evals.plan.study import Study
from evals.record.platform_record import run_platform
from evals.record.run_parts import PlatformRecord, SpeedRecord
from evals.schemas import STUDY
from evals.record.run_record_model import RunRecord, StoredRecord, TaskRecord

_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


class StudyGate(BaseModel):
    """The gate every comparison of the study was decided with."""

    model_config = _CONFIG

    alpha: float = Field(description="One-sided significance level of the tests.")
    margin: float = Field(description="Non-inferiority margin, as a share (0.03 = 3 points).")
    correction: str = Field(description="Multiple-testing correction.")
    family: str = Field(description="The family the correction runs over, in words.")


class StudySpeed(StoredRecord):
    """A comparison's TPOT speedup and its interval (a part of its RunRecord `speed`)."""

    model_config = _CONFIG

    tpot_speedup: float = Field(description="Baseline TPOT / candidate TPOT.")
    ci_low: float | None = Field(description="Lower end of the speedup's interval.")
    ci_high: float | None = Field(description="Upper end of the speedup's interval.")


class InteractionRecord(StoredRecord):
    """Whether two optimizations interact on a task
    (evals.analyse.interaction.TaskInteraction)."""

    model_config = _CONFIG

    task: str = Field(description="The task.")
    first: str = Field(description="`factor=level` of the first optimization.")
    second: str = Field(description="`factor=level` of the second optimization.")
    arms: dict[str, str] = Field(description="Role (neither, first_only, second_only, both) "
                                             "-> arm name.")
    n: int = Field(description="Items every one of the four arms ran.")
    accuracy: dict[str, float] = Field(description="Role -> the arm's mean on the task's "
                                                   "accuracy scale.")
    contrast: float | None = Field(description="Mean item-level interaction contrast; "
                                               "None when the metric is not 0/1.")
    ci_low: float | None = Field(description="Lower end of the contrast's interval.")
    ci_high: float | None = Field(description="Upper end of the contrast's interval.")
    pvalue: float | None = Field(description="One-sided: the combination is worse than its "
                                             "parts add up to.")
    items_one: int = Field(description="Items whose contrast is negative.")
    items_two: int = Field(description="Items whose contrast is positive.")
    significant: bool = Field(description="pvalue below the study's alpha.")
    sentence: str = Field(description="The finding in one sentence.")


class ArmDevices(StoredRecord):
    """Which devices one arm had (evals.plan.devices.Assignment)."""

    model_config = _CONFIG

    devices: list[str | int] = Field(description="The GPU ids or CPU cores it had.")
    env: dict[str, str] = Field(description="The environment its worker got (e.g. "
                                            "CUDA_VISIBLE_DEVICES).")
    order: int = Field(description="0 for the first arm started, 1 for the next, ...")


class StudyDevices(StoredRecord):
    """The study's device plan on this machine and each arm's devices
    (evals.plan.devices.plan_record)."""

    model_config = _CONFIG

    kind: str = Field(description="gpu or cpu.")
    pool: list[str | int] = Field(description="The devices handed out.")
    parallel: int = Field(description="Most arms running at once.")
    arms_per_gpu: int | None = Field(None, description="Most arms on one GPU at once.")
    arms: dict[str, ArmDevices] = Field(description="Each arm's devices, in start order.")


class RayPlacement(StoredRecord):
    """Where a study's arms ran as Ray tasks (evals.dispatch.ray_executor)."""

    model_config = _CONFIG

    executor: Literal["ray"] = Field(description="Always `ray`.")
    address: str = Field(description="The Ray cluster's address, or `local`.")
    cluster: dict[str, int | float] = Field(description="The cluster's CPU and GPU totals.")
    shards: str = Field(description="What one Ray task ran: a whole `arm` or one `task`.")
    arms: dict[str, dict[str, int | float]] = Field(description="Each arm's Ray resources "
                                                          "(num_cpus, num_gpus).")


class StudyComparison(StoredRecord):
    """One arm against the study's baseline: its run's verdict, or why it did not run."""

    model_config = _CONFIG

    arm: str = Field(description="The candidate arm's name.")
    run_id: str | None = Field(None, description="The comparison's run id (absent when an "
                                                 "arm failed).")
    dir: str | None = Field(None, description="The comparison's run directory, relative to "
                                              "the study's.")
    verdict: Literal["PASS", "REGRESSION", "INCONCLUSIVE", "FAILED"] = Field(
        description="The comparison's verdict; FAILED when one of its arms failed.")
    exit_code: int = Field(description="The exit code of that verdict.")
    reason: str = Field(description="The verdict in one sentence.")
    tasks: list[TaskRecord] = Field([], description="Each task's result (a part of the "
                                                    "comparison's RunRecord task).")
    speed: StudySpeed | None = Field(None, description="The TPOT speedup and its "
                                                           "interval, when measured.")


class StudyRecord(StoredRecord):
    """A study's result: study.json."""

    model_config = _CONFIG

    schema_version: int = Field(STUDY.version, description="Layout version of this record.")
    kind: Literal["study"] = Field(description="Always `study`.")
    run_id: str = Field(description="The study's id, its directory name under reports/.")
    name: str = Field(description="The study's name in its config.")
    config: str = Field(description="The study's config file.")
    baseline: str = Field(description="The arm every other arm is compared with.")
    arms: list[str] = Field(description="Every arm, the baseline first.")
    factors: dict[str, list[str]] = Field(description="A factorial study's factors and their "
                                                      "levels.")
    levels: dict[str, dict[str, str]] = Field(description="Each arm's level of each factor.")
    tasks: list[str] = Field(description="The tasks every comparison ran.")
    gate: StudyGate = Field(description="The study's gate.")
    verdict: Literal["PASS", "REGRESSION", "INCONCLUSIVE"] = Field(
        description="The study's verdict over every comparison.")
    exit_code: int = Field(description="The process exit code of the study.")
    reason: str = Field(description="The verdict in one sentence.")
    comparisons: list[StudyComparison] = Field(description="Each candidate arm's comparison.")
    interactions: list[InteractionRecord] = Field(description="Factor interactions "
                                               "(evals.analyse.interaction), per task.")
    failed: dict[str, str] = Field(description="Each failed arm's message.")
    engines: dict[str, dict[str, JsonValue] | None] | None = Field(
        None, description="Each arm's effective engine config (setting -> value, as vLLM "
        "reports it).")
    versions: dict[str, str] | None = Field(None, description="The library versions the arms "
                                                              "ran with.")
    platform: PlatformRecord | None = Field(None, description="The machine the arms ran on.")
    wall_seconds: float = Field(description="The study's wall time.")
    devices: StudyDevices | RayPlacement | None = Field(None, description="Which devices "
                                                        "(or Ray resources) each arm had.")


def read_study_record(path: Path) -> StudyRecord:
    """The one reader of study.json (its version checked by evals.schemas.STUDY)."""
    return StudyRecord.from_stored(STUDY.read(path), path)


def comparison_entry(arm: str, run_id: str, directory: str, record: RunRecord) -> StudyComparison:
    """What study.json keeps of one comparison's RunRecord."""
    return StudyComparison(
        arm=arm, run_id=run_id, dir=directory, verdict=record.verdict,
        exit_code=record.exit_code, reason=record.reason,
        tasks=[TaskRecord(**{k: getattr(t, k) for k in _STUDY_TASK_FIELDS})
               for t in record.tasks],
        speed=_speed_line(record.speed))


# what study.json keeps of each comparison's task results
_STUDY_TASK_FIELDS = ("task", "metric", "gated", "verdict", "delta", "ci_low", "ci_high",
                      "regression_pvalue", "regression_pvalue_adjusted", "correct_to_wrong",
                      "wrong_to_correct", "n", "mde", "baseline_mean", "candidate_mean")


def _speed_line(speed: SpeedRecord | None) -> StudySpeed | None:
    if speed is None or speed.tpot_speedup is None:
        return None
    return StudySpeed(tpot_speedup=speed.tpot_speedup, ci_low=speed.ci_low,
                      ci_high=speed.ci_high)


def build_study_record(study: Study, run_id: str, comparisons: dict[str, StudyComparison],
                       interactions: list, failed: dict, manifests: dict, seconds: float,
                       devices: dict) -> StudyRecord:
    """The study's verdict over its comparisons: REGRESSION if any arm regresses, else
    INCONCLUSIVE if any is (or failed), else PASS; a failed arm makes the exit code 4."""
    verdicts = [c.verdict for c in comparisons.values()]
    if any(v == "REGRESSION" for v in verdicts):
        verdict = "REGRESSION"
    elif any(v in ("INCONCLUSIVE", "FAILED") for v in verdicts):
        verdict = "INCONCLUSIVE"
    else:
        verdict = "PASS"
    regressed = [a for a, c in comparisons.items() if c.verdict == "REGRESSION"]
    if failed:
        code = ExitCode.RUN_FAILED
        reason = f"arm(s) {', '.join(failed)} failed; rerun the same command to resume"
    else:
        code = Verdict(verdict).exit_code
        reason = (f"regression in {', '.join(regressed)}" if regressed else
                  "every arm is non-inferior on every gated task" if verdict == "PASS" else
                  "cannot show non-inferiority for " + ", ".join(
                      a for a, c in comparisons.items() if c.verdict == "INCONCLUSIVE"))
    settings = study.settings
    return StudyRecord(
        kind="study", run_id=run_id, name=study.name, config=study.source,
        baseline=study.baseline, arms=list(study.arms),
        factors={f: list(levels) for f, levels in study.factors.items()},
        levels=study.levels, tasks=[t.name for t in settings.tasks],
        gate=StudyGate(alpha=settings.gate.alpha, margin=settings.gate.margin,
                       correction=settings.gate.correction,
                       family="Holm over every gated (arm, task) comparison with the baseline"),
        verdict=verdict, exit_code=int(code), reason=reason,
        comparisons=[comparisons[a] for a in study.candidates],
        interactions=interactions, failed=failed,
        engines={a: m.get("effective_engine_config") for a, m in manifests.items()},
        versions=next((m.get("versions") for m in manifests.values() if m.get("versions")),
                      None),
        platform=run_platform("study", manifests), wall_seconds=round(seconds, 1),
        devices=devices)
