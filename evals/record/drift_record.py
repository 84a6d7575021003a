"""The typed `drift` part of a drift run's record: the deployment, its golden run and
each gated task's EWMA control chart as the drift gate decided on it
(evals.decide.drift.chart_tasks; each chart carries its own version, evals.schemas
.DRIFT_CHART)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from evals.record.stored import PART_CONFIG, StoredRecord
from evals.schemas import DRIFT_CHART


class DriftChartRecord(StoredRecord):
    """One task's EWMA chart over the drift runs, this run last."""

    # `lambda` is a Python keyword: the field is `lam`, stored under its JSON name
    model_config = ConfigDict(**PART_CONFIG, validate_by_name=True, validate_by_alias=True,
                              serialize_by_alias=True)

    schema_version: int = Field(DRIFT_CHART.version, description="Layout version of the "
                                                                 "chart.")
    method: str = Field(description="The chart in words.")
    lam: float = Field(alias="lambda", description="The EWMA's smoothing weight.")
    L: float = Field(description="Width of the control limits, in sigmas.")
    target: float | None = Field(None, description="The in-control delta (0).")
    sigma_source: str | None = Field(None, description="Where each run's sigma comes from.")
    runs: list[str] = Field(description="The drift runs charted, oldest first.")
    delta: list[float] = Field(description="Each run's delta against the golden run.")
    sigma: list[float] = Field(description="Each run's standard error of its delta.")
    ewma: list[float] = Field(description="The EWMA statistic after each run.")
    lower_limit: list[float] = Field(description="The lower control limit at each run.")
    alarms: list[int] = Field(description="Indices of the runs where the EWMA fell below "
                                          "its limit.")
    alarm_now: bool = Field(description="Whether this run raised an alarm.")


class DriftRecord(StoredRecord):
    """A drift run's comparison with its deployment's golden run."""

    model_config = PART_CONFIG

    deployment: str = Field(description="The deployment tracked.")
    golden_run: str = Field(description="The pinned golden run's id.")
    arm: str = Field(description="The arm rerun against it.")
    charts: dict[str, DriftChartRecord] = Field(description="Each gated task's control "
                                                            "chart.")
