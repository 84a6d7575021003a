"""`ReleaseRecord`: one release decision as a typed, versioned model (release.json), its
builder, its one writer and its one reader; and `run_facts`, what the release decision
(evals.decide.release) takes of a run's RunRecord.

The reader refuses a release.json newer than this suite (evals.schemas.RELEASE); the
release page, release.md, junit.xml and the CI outputs take this model.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evals import __version__
from evals.decide.release import ReleaseDecision, RunFacts, TaskResult
from evals.errors import UserError
from evals.plan.release_policy import ReleasePolicy
from evals.record.run_record_model import RunRecord, StoredRecord
from evals.schemas import RELEASE

RELEASE_FILE = "release.json"
_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


def config_hash(config: dict) -> str:
    """The hash `ab` ends its run ids with (evals.dispatch.arms.run_id_for: the config
    without `source` and `description`, as pydantic's compact JSON), from a record's
    `config`."""
    plain = {k: v for k, v in config.items() if k not in ("source", "description")}
    blob = json.dumps(plain, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:8]


def _created(value: str, where: object) -> datetime:
    try:
        created = datetime.fromisoformat(value)
    except ValueError:
        raise UserError(f"{where}: `created` {value!r} is not an ISO 8601 time.") from None
    return created if created.tzinfo else created.replace(tzinfo=timezone.utc)


def run_facts(record: RunRecord, *, source: str, report: str | None,
              deployment: str | None = None, where: object = None) -> RunFacts:
    """What the release decision needs of one run. `deployment` defaults to the one the
    run store records the run under (the config's `drift.deployment`, else its name)."""
    config = record.config
    if deployment is None:
        drift = config.get("drift") if isinstance(config.get("drift"), dict) else {}
        deployment = drift.get("deployment") or config.get("name")
    candidate = record.arms.get("candidate")
    versions = (candidate.versions if candidate else None) or {}
    platform = record.platform or (candidate.platform if candidate else None)
    hardware = platform.summary if platform else None
    exercise = record.exercise
    tasks = tuple(TaskResult(
        task=t.task, metric=t.metric, binary=bool(t.binary), clustered=t.clusters is not None,
        n=t.n, correct_to_wrong=t.correct_to_wrong, wrong_to_correct=t.wrong_to_correct,
        baseline_mean=t.baseline_mean, candidate_mean=t.candidate_mean, delta=t.delta,
        ci_low=t.ci_low, ci_high=t.ci_high, ci_method=t.ci_method,
        regression_pvalue=t.regression_pvalue, regression_test=t.regression_test)
        for t in record.tasks)
    return RunFacts(
        run_id=record.run_id, created=_created(record.created, where or source),
        source=source, report=report,
        config_hash=config_hash(config) if record.kind != "compare" else None,
        deployment=deployment if isinstance(deployment, str) else None,
        vllm=versions.get("vllm") if isinstance(versions.get("vllm"), str) else None,
        hardware=hardware if isinstance(hardware, str) else None,
        not_exercised=(tuple(exercise.not_exercised) if exercise else None),
        alpha=record.gate.alpha, tasks=tasks)


class OtherRunRecord(BaseModel):
    model_config = _CONFIG

    run_id: str = Field(description="A run that held the benchmark but was not used.")
    why: str = Field(description="Why not: older than the one used, stale or mismatched.")


class BenchmarkRecord(BaseModel):
    """One benchmark's evidence and decision (evals.decide.release.BenchmarkDecision)."""

    model_config = _CONFIG

    benchmark: str = Field(description="The task, or task:metric.")
    tier: Literal["critical", "supporting", "advisory"] = Field(description="Its tier.")
    blocking: bool = Field(description="Whether its tier can block the release.")
    status: Literal["PASS", "REGRESSION", "INCONCLUSIVE", "MISSING", "STALE", "MISMATCHED"] = \
        Field(description="The decision, or what is wrong with the evidence.")
    margin: float | None = Field(description="The margin judged at, accuracy units.")
    margin_rule: str = Field(description="How the margin came about (absolute, relative).")
    reason: str = Field(description="The decision in one sentence.")
    run_id: str | None = Field(None, description="The run judged on (or shown, for STALE and "
                                                 "MISMATCHED).")
    source: str | None = Field(None, description="That run's directory.")
    report: str | None = Field(None, description="That run's report.html.")
    created: str | None = Field(None, description="When that run was analysed (UTC).")
    age_days: float | None = Field(None, description="Its age at the release's `as_of`.")
    metric: str | None = Field(None, description="The metric compared.")
    n: int | None = Field(None, description="Paired items.")
    baseline_mean: float | None = Field(None, description="The baseline arm's mean.")
    candidate_mean: float | None = Field(None, description="The candidate arm's mean.")
    delta: float | None = Field(None, description="candidate_mean - baseline_mean.")
    ci_low: float | None = Field(None, description="Lower end of the delta's interval.")
    ci_high: float | None = Field(None, description="Upper end of the delta's interval.")
    ci_method: str | None = Field(None, description="How the interval was computed.")
    regression_pvalue: float | None = Field(None, description="p-value of 'it dropped'.")
    regression_test: str | None = Field(None, description="The test behind it.")
    regression_pvalue_adjusted: float | None = Field(None, description="After the policy's "
                                                     "correction over its family.")
    noninferiority_pvalue: float | None = Field(None, description="p-value of 'it dropped by "
                                                "the margin or more'.")
    noninferiority_test: str | None = Field(None, description="The test behind it.")
    other_runs: list[OtherRunRecord] = Field([], description="Runs of this benchmark not used.")


class ReleaseRecord(StoredRecord):
    """One release decision: release.json."""

    model_config = _CONFIG

    schema_version: int = Field(RELEASE.version, description="Layout version of this record.")
    kind: Literal["release"] = Field("release", description="Always `release`.")
    release_id: str = Field(description="release-<policy name>, the output folder's name.")
    created: str = Field(description="When the record was built (UTC, ISO 8601).")
    as_of: str = Field(description="The time runs' ages were measured at.")
    suite_version: str = Field(description="vllm-regression-evals version that built it.")
    policy_file: str = Field(description="The policy file.")
    policy: dict = Field(description="The policy as validated.")
    verdict: Literal["GO", "NO-GO", "INCONCLUSIVE"] = Field(description="The release verdict.")
    exit_code: int = Field(description="0 GO, 1 NO-GO, 3 INCONCLUSIVE.")
    reason: str = Field(description="The verdict in one sentence.")
    alpha: float = Field(description="One-sided significance level.")
    correction: str = Field(description="Correction over the blocking benchmarks' tests.")
    blocking: list[str] = Field(description="The tiers that block.")
    benchmarks: list[BenchmarkRecord] = Field(description="Every benchmark of the policy.")
    warnings: list[str] = Field(description="Benchmarks of tiers that do not block that did "
                                "not pass, and runs that could not be read.")
    runs: list[str] = Field(description="Every run considered (its directory).")


def build_release_record(policy: ReleasePolicy, decision: ReleaseDecision, *,
                         runs: list[str], warnings: list[str]) -> ReleaseRecord:
    benchmarks = []
    for b in decision.benchmarks:
        data = asdict(b)
        data["status"] = b.status.value
        benchmarks.append(BenchmarkRecord(**data))
    return ReleaseRecord(
        kind="release", release_id=f"release-{policy.name}",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        as_of=decision.as_of, suite_version=__version__, policy_file=policy.source,
        policy=policy.model_dump(mode="json", exclude={"source"}),
        verdict=decision.verdict.value, exit_code=int(decision.exit_code),
        reason=decision.reason, alpha=decision.alpha, correction=decision.correction,
        blocking=list(decision.blocking), benchmarks=benchmarks,
        warnings=list(decision.warnings) + list(warnings), runs=runs)


def write_release_record(out_dir: Path, record: ReleaseRecord) -> Path:
    """The one writer of release.json."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    RELEASE.write(Path(out_dir) / RELEASE_FILE, record.model_dump())
    return Path(out_dir) / RELEASE_FILE


def read_release_record(path: Path) -> ReleaseRecord:
    """The one reader of release.json: `path` is a release folder or its release.json."""
    path = Path(path)
    if path.is_dir():
        path = path / RELEASE_FILE
    if not path.is_file():
        raise UserError(f"{path}: no {RELEASE_FILE}; name a release folder written by "
                        "`python -m evals release`.")
    return ReleaseRecord.from_stored(RELEASE.read(path), path)
