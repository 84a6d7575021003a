"""What the run store hands out: index rows, stored runs and points of a task's series."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One run as the index lists it (no file is read to build it)."""

    run_id: str
    created: str
    """When the run was analysed (summary.json `created`), ISO 8601 in UTC."""
    recorded: str
    """When it was recorded into the store, ISO 8601 in UTC."""
    kind: str
    deployment: str
    """What the run tracks over time; defaults to the config's name."""
    config_name: str | None
    verdict: str | None
    exit_code: int | None
    n_tasks: int
    n_items: int
    """Rows in items.parquet (paired items of all tasks)."""
    golden: bool
    """Pinned as the golden run of its deployment."""
    source_dir: str
    """The run directory it was recorded from (holds report.html and the texts)."""
    problem: str | None = None
    """Why the run's files cannot be read, when checked (`list_runs(verify=True)`)."""

    @property
    def report(self) -> Path:
        """The run's own report.html (it may have been deleted since)."""
        return Path(self.source_dir) / "report.html"


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run's index entry, its manifest and its directory in the store."""

    entry: RunEntry
    manifest: dict
    directory: Path

    @property
    def run_id(self) -> str:
        return self.entry.run_id

    @property
    def drift_charts(self) -> dict[str, dict]:
        """The drift gate's charts per task as the run stored them (summary.json
        `drift.charts`, kept in the manifest's `summary_other`); {} for a run without."""
        other = self.manifest.get("summary_other")
        drift = other.get("drift") if isinstance(other, dict) else None
        charts = drift.get("charts") if isinstance(drift, dict) else None
        return charts if isinstance(charts, dict) else {}


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One run's result for one task, a point of that task's drift chart."""

    run_id: str
    created: str
    metric: str
    n: int
    delta: float
    """Candidate minus baseline, in accuracy units."""
    standard_error: float | None
    """Paired standard error of the delta (item sampling), None if not computable."""
    ci_low: float | None
    ci_high: float | None
    """The interval the run's verdict used (e.g. Tango's 90 % score interval)."""
    noise_flip_rate: float | None
    """A/A noise floor: share of items whose score changed between two baseline runs."""
    noise_flips: int | None
    verdict: str | None
    golden: bool
