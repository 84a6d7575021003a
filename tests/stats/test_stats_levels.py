"""One confidence level rule (issue 56): every statistic defaults to DEFAULT_CONFIDENCE_LEVEL
(scipy's 0.95), and the gate's intervals are at `interval_level(alpha)` = 1 - 2 alpha,
written in one place."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import evals
from evals.stats.intervals import DEFAULT_CONFIDENCE_LEVEL, interval_level

PACKAGE = Path(evals.__file__).parent
LEVEL_PARAMETERS = ("confidence_level", "confidence")


def test_interval_level_is_one_minus_two_alpha_and_refuses_what_has_no_interval():
    assert interval_level(0.05) == pytest.approx(0.90, abs=1e-15)
    assert interval_level(0.025) == pytest.approx(0.95, abs=1e-15)
    for bad in (0.0, 0.5, 0.7, -0.1):
        with pytest.raises(ValueError, match=r"alpha must be in \(0, 0.5\)"):
            interval_level(bad)


def _level_defaults():
    """(where, default) of every level parameter of every function and method in
    evals.stats, evals.analyse and evals.decide."""
    found = []
    for package in ("evals.stats", "evals.analyse", "evals.decide"):
        path = PACKAGE / package.split(".")[1]
        for info in pkgutil.iter_modules([str(path)]):
            module = importlib.import_module(f"{package}.{info.name}")
            for name, obj in vars(module).items():
                members = [(name, obj)]
                if inspect.isclass(obj):
                    members = [(f"{name}.{n}", m) for n, m in vars(obj).items()
                               if inspect.isfunction(m)]
                for qual, fn in members:
                    if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                        continue
                    for p in inspect.signature(fn).parameters.values():
                        if p.name in LEVEL_PARAMETERS and p.default is not p.empty:
                            found.append((f"{module.__name__}.{qual}({p.name})", p.default))
    return found


def test_every_level_default_is_the_one_default():
    found = _level_defaults()
    assert len(found) >= 10, found  # the scan sees the statistics it is meant to see
    # None: "the level the result was computed at" (a bootstrap result's own)
    assert [(where, d) for where, d in found if d not in (None, DEFAULT_CONFIDENCE_LEVEL)] == []


def _one_minus_two_times(node: ast.AST) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)
            and isinstance(node.left, ast.Constant) and node.left.value == 1
            and isinstance(node.right, ast.BinOp) and isinstance(node.right.op, ast.Mult)
            and isinstance(node.right.left, ast.Constant) and node.right.left.value == 2
            and ast.unparse(node.right.right).split(".")[-1] == "alpha")


def test_one_minus_two_alpha_is_written_once():
    written = sorted(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                     for path in PACKAGE.rglob("*.py")
                     for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if _one_minus_two_times(node))
    assert written == ["evals/stats/intervals.py:26"], written
