"""A study's own preflight: its arms pairwise distinct (by their identity, then by the
effective engine config vLLM resolves for each), and each comparison audited as a two-arm
config (evals.preflight.audit) from one resolution of every arm."""

from __future__ import annotations

from dataclasses import dataclass

from evals.errors import UserError
from evals.plan.study import Study
from evals.preflight.audit import audit_resolved
from evals.preflight.checks import (IDENTITY, AuditOutcome, arm_identity, resolved_or_recorded,
                                    trigger_geometry)


def check_study_arms_differ(study: Study, specs: dict) -> None:
    """Two arms with the same identity (evals.preflight.checks.arm_identity) would measure
    the same thing twice: named before any engine starts."""
    seen: dict = {}
    for arm, spec in specs.items():
        identity = arm_identity(spec)
        if identity in seen:
            raise UserError(f"{study.source}: arms `{seen[identity]}` and `{arm}` are identical "
                            f"(same {IDENTITY}); a study's arms must differ.")
        seen[identity] = arm


@dataclass(frozen=True)
class StudyAudit:
    """Each comparison's audit outcome, and every arm's effective engine config."""

    comparisons: dict[str, AuditOutcome]
    resolved: dict


def study_audit(study: Study, specs: dict, *, allow_undeclared: bool, echo) -> StudyAudit:
    """Every arm's effective engine config, resolved once (arms sharing an environment in one
    process), then each comparison audited as a two-arm config; arms that vLLM resolves to
    the same effective config are a stop."""
    resolved = resolved_or_recorded(specs)
    effective: dict = {}
    for arm, r in resolved.items():
        if r.effective is None:
            continue
        key = arm_identity(specs[arm], r.effective)
        if key in effective:
            raise UserError(f"{study.source}: vLLM resolves arms `{effective[key]}` and `{arm}` "
                            "to the same effective engine config; they would measure the same "
                            "thing twice.")
        effective[key] = arm
    per_arm = {}
    for arm, comparison in study.comparisons.items():
        pair = {"baseline": resolved[study.baseline], "candidate": resolved[arm]}
        audit = audit_resolved(comparison, pair, allow_undeclared=allow_undeclared)
        echo(f"[evals] {study.baseline} vs {arm}: " + audit.message())
        audit.check()
        per_arm[arm] = AuditOutcome(audit=audit.to_dict(), warnings=tuple(audit.warning_lines()),
                                    resolved={role: r.effective for role, r in pair.items()})
    if study.comparisons:
        trigger_geometry(next(iter(study.comparisons.values())),
                         {arm: r.effective for arm, r in resolved.items()}, specs, echo)
    return StudyAudit(per_arm, {arm: r.effective for arm, r in resolved.items()})
