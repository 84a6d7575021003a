"""The typed `preflight` part of a run's record: what the model doctor found before any
arm started (evals.preflight.doctor.DoctorReport) and the config audit of the arms'
resolved engine configs (evals.preflight.audit.AuditReport). A field an older writer did
not write reads as None."""

from __future__ import annotations

from pydantic import Field, JsonValue

from evals.record.stored import PART_CONFIG, StoredRecord


class FindingRecord(StoredRecord):
    """One thing the doctor found (evals.preflight.doctor.Finding)."""

    model_config = PART_CONFIG

    severity: str = Field(description="error, warning or info.")
    code: str = Field(description="The finding's short code.")
    message: str = Field(description="What was found, naming the file it is about.")
    arm: str | None = Field(None, description="The arm(s) it is about, if any.")


class DoctorRecord(StoredRecord):
    """The model doctor's report (evals.preflight.doctor.DoctorReport)."""

    model_config = PART_CONFIG

    source: str = Field(description="The model directory or config it examined.")
    findings: list[FindingRecord] = Field(description="What it found.")
    errors: int = Field(description="Findings of severity error.")
    warnings: int = Field(description="Findings of severity warning.")


class DifferenceRecord(StoredRecord):
    """One engine setting compared between the arms (evals.preflight.audit.Difference)."""

    model_config = PART_CONFIG

    field: str = Field(description="The setting, e.g. cache.enable_prefix_caching.")
    baseline: JsonValue = Field(description="The baseline's value, as vLLM reports it.")
    candidate: JsonValue = Field(description="The candidate's value.")
    status: str = Field(description="How the difference counts: declared, undeclared, "
                                    "same, ...")


class UndeclaredRecord(StoredRecord):
    """A difference between the arms that the config does not declare."""

    model_config = PART_CONFIG

    name: str = Field(description="The optimization (or setting) that differs.")
    fields: list[str] = Field(description="The settings that show it.")
    reason: str = Field(description="Why it counts as a difference.")


class AuditRecord(StoredRecord):
    """The config audit of the arms' resolved engine configs
    (evals.preflight.audit.AuditReport)."""

    model_config = PART_CONFIG

    source: str | None = Field(None, description="The config file audited.")
    intended_change: list[str] | None = Field(None, description="The declared change "
                                              "(`intended_change`), if the config gives one.")
    resolved: bool | None = Field(None, description="Whether both arms' configs were "
                                                    "resolved by vLLM.")
    requested: list[DifferenceRecord] | None = Field(None, description="The requested "
                                                     "engine arguments that differ.")
    effective: list[DifferenceRecord] | None = Field(None, description="The effective "
                                                     "engine settings that differ.")
    undeclared: list[UndeclaredRecord] | None = Field(None, description="Differences the "
                                                      "config does not declare.")
    unknown_declared: list[str] | None = Field(None, description="Declared changes the "
                                               "audit does not know.")
    notes: list[str] | None = Field(None, description="What a reader should know of it.")
    seconds: dict[str, float] | None = Field(None, description="Each arm's resolve time.")
    resolved_in: dict[str, str] | None = Field(None, description="Where each arm's config "
                                               "was resolved.")
    allow_undeclared: bool | None = Field(None, description="Whether undeclared differences "
                                                            "were allowed.")
    stopped: bool | None = Field(None, description="Whether the audit stopped the run.")


class PreflightRecord(StoredRecord):
    """What was checked before and as the arms started: the doctor and the audit."""

    model_config = PART_CONFIG

    doctor: DoctorRecord | None = Field(None, description="The model doctor's report.")
    audit: AuditRecord | None = Field(None, description="The config audit, where it ran.")
