"""The frozen plan of a two-arm run (evals.plan.run_plan.RunPlan) and `run_ab`'s shape:
plan -> preflight -> run -> finish, with only the plan (never the config) handed on once
the plan is made."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import yaml

from evals.dispatch.arms import arm_specs, run_id_for
from evals.errors import UserError
from evals.pipelines import ab
from evals.plan.config import load_config
from evals.plan.executor import Executor
from evals.plan.schedule import look_alpha
from evals.preflight.checks import preflight

MODEL = Path(__file__).resolve().parents[2] / "models" / "tiny-reviews"


def write_config(tmp_path: Path, **extra) -> Path:
    data = {"name": "planned", "model": str(MODEL), "limit": 5, "seed": 7,
            "tasks": [{"name": "tiny_addition"}, {"name": "tiny_reviews_mc", "gate": False}],
            "arms": {"baseline": {"engine": {"dtype": "bfloat16"}},
                     "candidate": {"engine": {"dtype": "bfloat16",
                                              "enable_prefix_caching": True},
                                   "env": {"HF_TOKEN": "hf_planTestValue"}}},
            **extra}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_plan_holds_what_the_run_needs_and_is_frozen(tmp_path):
    config = load_config(write_config(tmp_path, sequential={"chunk": 20},
                                      drift={"deployment": "prod-7b"}))
    plan = ab.plan_ab(config, tmp_path / "reports")
    assert plan.run_id == run_id_for(config) and plan.run_dir == tmp_path / "reports" / plan.run_id
    assert dict(plan.specs) == arm_specs(config, plan.run_dir)
    assert plan.task_names == ["tiny_addition", "tiny_reviews_mc"] and plan.seed == 7
    assert plan.gate == config.gate and plan.deployment == "prod-7b"
    assert plan.executor == Executor() and plan.source == config.source
    # the looks: one gated task, so the interim looks spend half of alpha
    assert plan.looks.chunk == 20 and plan.looks.margin == config.gate.margin
    assert plan.looks.alpha == look_alpha(config.gate.alpha, 1) == config.gate.alpha / 2
    # the record's config dump holds the secret as a marker only
    assert "hf_planTestValue" not in str(plan.config_dump)
    assert plan.config_dump["arms"]["candidate"]["env"]["HF_TOKEN"].startswith("<redacted")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 8
    with pytest.raises(TypeError):
        plan.specs["candidate"] = plan.specs["baseline"]
    plain = ab.plan_ab(load_config(write_config(tmp_path)), tmp_path / "reports")
    assert plain.looks is None and plain.deployment == "planned"


def test_preflight_checks_the_plan_before_any_engine(tmp_path):
    """A sequential run on Ray is refused by the plan's preflight, naming the config."""
    config = load_config(write_config(tmp_path, sequential={"chunk": 20}))
    plan = ab.plan_ab(config, tmp_path / "reports", executor=Executor(ray=True))
    with pytest.raises(UserError, match=r"c\.yaml: `sequential` needs the local executor"):
        preflight(plan, echo=lambda line: None)
    same = load_config(write_config(tmp_path, arms={"baseline": {}, "candidate": {}}))
    with pytest.raises(UserError, match="arms.baseline and arms.candidate are identical"):
        preflight(ab.plan_ab(same, tmp_path / "reports"), echo=lambda line: None)


def _calls(node: ast.AST) -> list[str]:
    return [c.func.id if isinstance(c.func, ast.Name) else ast.unparse(c.func)
            for c in ast.walk(node) if isinstance(c, ast.Call)]


def test_run_ab_reads_plan_preflight_run_finish_and_hands_on_only_the_plan():
    body = [statement for statement in ast.parse(inspect.getsource(ab.run_ab)).body[0].body
            if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))]
    first = body[0]
    assert isinstance(first, ast.Assign) and first.targets[0].id == "plan"
    assert _calls(first)[0] == "plan_ab"
    after = body[1:]
    names = {n.id for statement in after for n in ast.walk(statement) if isinstance(n, ast.Name)}
    assert "config" not in names, "the config is handed on after the plan was made"
    order = [name for statement in after for name in _calls(statement)]
    steps = [name for name in order if name in ("preflight", "run_plan", "finish")]
    assert steps == ["preflight", "run_plan", "finish"]
