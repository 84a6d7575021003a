"""The data flows one way: config -> arm runs -> paired samples -> analysis -> verdict ->
report/history. Checked on the source's import statements (module level and inside
functions), followed transitively through the package."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evals"
DOWNSTREAM_OF_THE_RUNNER = ("evals.pair.pairing", "evals.pair.metric_scale", "evals.analyse",
                            "evals.decide", "evals.report", "evals.store", "evals.stats",
                            "evals.record.run_record", "evals.comparison", "evals.run",
                            "evals.canary")


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
            if any(name == d or name.startswith(d + ".") for d in DOWNSTREAM_OF_THE_RUNNER):
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


def test_the_readme_layout_names_every_stage_folder_and_module():
    """README, "How the code is laid out": the folders it names exist, every package of
    evals/ is in it, and every top-level module is named."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## How the code is laid out", 1)[1].split("\n## ", 1)[0]
    folders = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`"):
            folders.update(part.strip("` ").rstrip("/") for part in cells[1].split(","))
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert folders == packages
    modules = {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py", "__main__.py"}
    assert all(f"`{m}`" in section or f"evals/{m}" in section for m in modules), modules
