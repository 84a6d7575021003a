"""A study's own preflight: its arms pairwise distinct by their identity, before any engine
starts. By the effective engine config vLLM resolves for each, and each comparison's audit,
the run checks them (evals.dispatch.config_audit.study_audit)."""

from __future__ import annotations

from evals.errors import UserError
from evals.plan.study import Study
from evals.preflight.checks import IDENTITY, arm_identity


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
