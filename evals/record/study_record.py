"""`StudyRecord`: a study's result as a typed, versioned model (study.json), with its one
reader `read_study_record`.

The study pipeline (evals.study_pipeline) builds it; the study page, the terminal matrix,
the CI outputs and `gate-config` take it. Like RunRecord it dumps the keys it was given, so
study.json keeps its layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evals.record.records import STUDY
from evals.record.run_record_model import StoredRecord, TaskRecord

_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


class StudyGate(BaseModel):
    """The gate every comparison of the study was decided with."""

    model_config = _CONFIG

    alpha: float = Field(description="One-sided significance level of the tests.")
    margin: float = Field(description="Non-inferiority margin, as a share (0.03 = 3 points).")
    correction: str = Field(description="Multiple-testing correction.")
    family: str = Field(description="The family the correction runs over, in words.")


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
    speed: dict[str, Any] | None = Field(None, description="The TPOT speedup and its "
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
    factors: dict[str, list[Any]] = Field(description="A factorial study's factors and their "
                                                      "levels.")
    levels: dict[str, dict[str, Any]] = Field(description="Each arm's level of each factor.")
    tasks: list[str] = Field(description="The tasks every comparison ran.")
    gate: StudyGate = Field(description="The study's gate.")
    verdict: Literal["PASS", "REGRESSION", "INCONCLUSIVE"] = Field(
        description="The study's verdict over every comparison.")
    exit_code: int = Field(description="The process exit code of the study.")
    reason: str = Field(description="The verdict in one sentence.")
    comparisons: list[StudyComparison] = Field(description="Each candidate arm's comparison.")
    interactions: list[dict[str, Any]] = Field(description="Factor interactions "
                                               "(evals.analyse.interaction), per task.")
    failed: dict[str, str] = Field(description="Each failed arm's message.")
    engines: dict[str, Any] | None = Field(None, description="Each arm's effective engine "
                                                             "config.")
    versions: dict[str, Any] | None = Field(None, description="The library versions the arms "
                                                              "ran with.")
    platform: dict[str, Any] | None = Field(None, description="The machine the arms ran on.")
    wall_seconds: float = Field(description="The study's wall time.")
    devices: dict[str, Any] | None = Field(None, description="Which devices (or Ray nodes) "
                                                             "each arm had.")


def read_study_record(path: Path) -> StudyRecord:
    """The one reader of study.json (its version checked by evals.record.records.STUDY)."""
    return StudyRecord.from_stored(STUDY.read(path), path)
