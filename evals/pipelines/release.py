"""`python -m evals release POLICY.yaml [RUN_DIR ...]`: one release decision from finished
runs - the run directories named, else every run in the run store - under a release policy
(evals.plan.release_policy); decided by evals.decide.release, recorded as release.json
(evals.record.release_record), reported as release.html, release.md and junit.xml
(evals.report.release). No run stage, no engine, no lm-eval.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from evals.decide.release import RunFacts, decide_release
from evals.errors import ExitCode, UserError
from evals.paths import REPORTS_DIR
from evals.plan.release_policy import load_policy
from evals.record.release_record import (ReleaseRecord, build_release_record, run_facts,
                                         write_release_record)
from evals.record.run_record import SUMMARY_FILE, migrate_summary, read_run_record
from evals.report.release import write_release_outputs

REPORT_FILE = "report.html"


def _from_dirs(run_dirs: list[Path]) -> list[RunFacts]:
    runs, seen = [], set()
    for given in run_dirs:
        path = Path(given)
        if path.is_file() and path.name == SUMMARY_FILE:
            path = path.parent
        if not path.is_dir():
            what = "not a run directory" if path.exists() else "no such run directory"
            raise UserError(f"{given}: {what}; name reports/<run-id> of a finished run.")
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        record = read_run_record(path)
        report = path / REPORT_FILE
        runs.append(run_facts(record, source=str(path), where=path / SUMMARY_FILE,
                              report=str(report) if report.is_file() else None))
    return runs


def _from_store(reports_dir: Path, store_root: Path | None, warnings: list[str]
                ) -> tuple[list[RunFacts], str]:
    """Every run of the store; a run whose files cannot be read is a warning."""
    from evals.store import open_store

    store = open_store(reports_dir, store_root)
    runs = []
    for entry in store.list_runs(limit=None):
        try:
            manifest = store.get(entry.run_id).manifest
            data = {"schema_version": manifest.get("summary_schema_version"),
                    **{k: manifest.get(k) for k in (
                        "kind", "run_id", "created", "suite_version", "verdict", "exit_code",
                        "reason", "gate", "tasks", "arms", "sources", "config", "warnings")},
                    **(manifest.get("summary_other") or {})}
            where = store.root / "runs" / entry.run_id / "manifest.json"
            record = migrate_summary(data, where)
        except UserError as exc:
            warnings.append(f"run store: {entry.run_id} not considered: {exc}")
            continue
        report = Path(entry.source_dir) / REPORT_FILE
        runs.append(run_facts(record, source=entry.source_dir, deployment=entry.deployment,
                              where=where, report=str(report) if report.is_file() else None))
    return runs, str(store.root)


def run_release(policy_path: Path, run_dirs: list[Path], *, reports_dir: Path = REPORTS_DIR,
                out_dir: Path | None = None, store_root: Path | None = None,
                as_of: datetime | None = None, echo=print
                ) -> tuple[ExitCode, Path, ReleaseRecord]:
    """Decides, records and reports the release; returns its exit code, its folder
    (default <reports>/release-<policy name>) and its record."""
    policy = load_policy(policy_path)
    as_of = as_of or datetime.now(timezone.utc)
    warnings: list[str] = []
    if run_dirs:
        runs = _from_dirs(run_dirs)
        where = f"{len(runs)} run director{'y' if len(runs) == 1 else 'ies'}"
    else:
        runs, root = _from_store(reports_dir, store_root, warnings)
        where = f"the run store {root} ({len(runs)} runs)"
    decision = decide_release(policy, runs, as_of)
    record = build_release_record(policy, decision, runs=[r.source for r in runs],
                                  warnings=warnings)
    out_dir = Path(out_dir) if out_dir else Path(reports_dir) / record.release_id
    write_release_record(out_dir, record)
    written = write_release_outputs(record, out_dir)
    echo(f"[evals] release {policy.name}: {len(policy.benchmarks())} benchmarks from {where}")
    for b in record.benchmarks:
        echo(f"  {b.status:<12} {b.benchmark} ({b.tier}{'' if b.blocking else ', warns'}): "
             f"{b.reason}")
    for w in record.warnings:
        echo(f"warning: {w}")
    echo(f"{record.verdict} (exit {record.exit_code}): {record.reason}")
    echo(f"release page: {written['release.html']}")
    return ExitCode(record.exit_code), out_dir, record
