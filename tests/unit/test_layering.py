"""The data flows one way: config -> arm runs -> paired samples -> analysis -> verdict ->
report/history. Checked on the source's import statements (module level and inside
functions), followed transitively through the package."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evals"
DOWNSTREAM_OF_THE_RUNNER = ("evals.pairing", "evals.analysis", "evals.verdict",
                            "evals.report", "evals.store", "evals.stats", "evals.early_stop",
                            "evals.comparison", "evals.gates")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == "evals"}


def _sources() -> dict[str, Path]:
    return {_module(p): p for p in PACKAGE.rglob("*.py")}


def _closure(start: str, sources: dict[str, Path]) -> dict[str, str]:
    """Every evals module `start` imports, directly or not: {module: who imported it}."""
    seen, todo = {start: ""}, [start]
    while todo:
        current = todo.pop()
        for name in _imports(sources[current]):
            while name and name not in sources:  # `from evals.x import y`: y is a name
                name = name.rpartition(".")[0]
            if name and name not in seen:
                seen[name] = current
                todo.append(name)
    return seen


def test_the_runner_imports_nothing_downstream_of_it():
    sources = _sources()
    runner = [m for m in sources if m.startswith("evals.runner")]
    assert len(runner) >= 10
    bad = {}
    for module in runner:
        for name, via in _closure(module, sources).items():
            if name.startswith(DOWNSTREAM_OF_THE_RUNNER):
                bad[f"{module} -> {name}"] = via
    assert bad == {}


def test_the_closure_follows_imports_inside_functions(tmp_path):
    """The checker itself: an import inside a function body counts."""
    (tmp_path / "m.py").write_text("def f():\n    from evals.report import write_reports\n")
    assert "evals.report" in _imports(tmp_path / "m.py")


def test_statistics_import_nothing_of_the_suite():
    sources = _sources()
    for module in (m for m in sources if m.startswith("evals.stats")):
        outside = {n for n in _closure(module, sources) if not n.startswith("evals.stats")
                   and n != "evals"}
        assert outside == set(), module
