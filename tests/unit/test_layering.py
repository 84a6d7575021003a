"""The data flows one way: config -> arm runs -> paired samples -> analysis -> verdict ->
record -> report/history, the pipelines on top. Checked on the source's import statements
(module level and inside functions, relative ones resolved), followed transitively through
the package. scripts/code_shape.py prints the same graph's cycles and upward imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evals"
DOWNSTREAM_OF_THE_RUNNER = ("evals.pair.pairing", "evals.pair.metric_scale", "evals.analyse",
                            "evals.decide", "evals.report", "evals.store", "evals.stats",
                            "evals.record.run_record", "evals.pipelines", "evals.dispatch")


# The stages in the order the data flows; a module may import its own stage, an earlier
# one, and the shared modules. Each stage is whole folders (or top-level modules), with no
# module of a folder placed elsewhere; the shared modules are top-level leaves that import
# only each other.
STAGES = (
    ("statistics", ("evals.stats",)),  # pure: arrays in, results out (plan's sample sizes use them)
    ("plan", ("evals.plan",)),  # the config, the arm specs, the fault catalog
    # the worker side: the one door to lm-eval and vLLM (the fault plugin runs inside vLLM);
    # preflight asks it how an arm's engine will be called without starting one
    ("arm runs, worker side", ("evals.runner", "evals.faults")),
    ("preflight", ("evals.preflight",)),
    ("arm runs, parent side", ("evals.dispatch",)),
    ("paired samples", ("evals.pair",)),
    ("analysis", ("evals.analyse",)),
    ("verdict", ("evals.decide",)),
    ("record", ("evals.record",)),
    ("report and history", ("evals.report", "evals.store")),
    ("pipelines", ("evals.pipelines", "evals.cli", "evals.__main__")),
)
SHARED = ("evals", "evals.errors", "evals.paths", "evals.atomic_files", "evals.hardware",
          "evals.text_hygiene", "evals.schemas")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _statements(path: Path):
    """(module, names) of every import statement: `import a.b` is ("a.b", ()), `from a
    import b, c` is ("a", ("b", "c")), a relative one resolved."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
            yield _absolute(path, node.level, node.module), tuple(a.name for a in node.names)


def _imports(path: Path) -> set[str]:
    found = set()
    for module, names in _statements(path):
        found.add(module)
        found.update(f"{module}.{name}" for name in names)
    return {name for name in found if name.split(".")[0] == "evals"}


def _absolute(path: Path, level: int, module: str | None) -> str:
    """`from ..x import y` in evals/a/b.py: evals.x."""
    if not level:
        return module or ""
    package = _module(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    package = package[:len(package) - level + 1]
    return ".".join(package + ([module] if module else []))


def _sources() -> dict[str, Path]:
    found = {_module(p): p for p in PACKAGE.rglob("*.py")}
    # an empty or misdirected glob would make every check below pass on nothing
    assert len(found) >= 100 and {"evals.cli", "evals.stats.binary", "evals.runner.worker",
                                  "evals.report._html"} <= set(found), sorted(found)[:10]
    return found


def _edges(module: str, sources: dict[str, Path]) -> set[str]:
    """The evals modules `module` imports itself. `from evals.x import y` imports the
    module evals.x.y where there is one (its package runs first, as for any submodule),
    otherwise the name y of evals.x."""
    found = set()
    for imported, names in _statements(sources[module]):
        for name in [f"{imported}.{n}" for n in names] or [imported]:
            while name and name not in sources:
                name = name.rpartition(".")[0]
            if name.split(".")[0] == "evals" and name != module:
                found.add(name)
    return found


def _closure(start: str, sources: dict[str, Path]) -> dict[str, str]:
    """Every evals module `start` imports, directly or not: {module: who imported it}."""
    seen, todo = {start: ""}, [start]
    while todo:
        current = todo.pop()
        for name in _edges(current, sources):
            if name not in seen:
                seen[name] = current
                todo.append(name)
    return seen


def import_graph() -> dict[str, set[str]]:
    sources = _sources()
    return {module: _edges(module, sources) for module in sources}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan,
    "Depth-first search and linear graph algorithms", SIAM J. Comput. 1972), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def stage_of(module: str) -> int | None:
    """The module's place in STAGES (the longest name that covers it decides); None for a
    shared module, -1 for one in no stage."""
    if module in SHARED:
        return None
    places = [(len(name), place) for place, (_, names) in enumerate(STAGES) for name in names
              if module == name or module.startswith(name + ".")]
    return max(places)[1] if places else -1


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """`a -> b` for every import of a later stage's module (or one in no stage)."""
    found = []
    for module, names in sorted(graph.items()):
        here = stage_of(module)
        for name in sorted(names):
            there = stage_of(name)
            if there is not None and (here is None or -1 in (here, there) or there > here):
                found.append(f"{module} -> {name}")
    return found


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
    """docs/architecture.md, "How the code is laid out": the folders it names exist, every
    package of evals/ is in it, and every top-level module is named."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("# How the code is laid out\n", 1)[1].split("\n## ", 1)[0]
    folders = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`"):
            folders.update(part.strip("` ").rstrip("/") for part in cells[1].split(","))
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert {"stats", "runner", "report", "pipelines"} <= packages and len(packages) >= 12
    assert folders == packages
    modules = {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py", "__main__.py"}
    assert {"cli.py", "errors.py"} <= modules
    assert all(f"`{m}`" in section or f"evals/{m}" in section for m in modules), modules


def test_every_module_imports_only_its_own_or_an_earlier_stage():
    """STAGES, in order; a shared module imports only shared ones."""
    graph = import_graph()
    unplaced = sorted(m for m in graph if stage_of(m) == -1)
    assert unplaced == [], "modules in no stage (add them to STAGES or SHARED)"
    upward = upward_imports(graph)
    assert upward == [], "imports of a later stage: " + ", ".join(upward)


def test_the_package_has_no_import_cycles():
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_code_shape_finds_no_cycle_and_no_upward_import():
    """scripts/code_shape.py's check, as a user runs it: exit 0, each count printed as 0."""
    script = PACKAGE.parent / "scripts" / "code_shape.py"
    done = subprocess.run([sys.executable, str(script), "--most", "1"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "import cycles: 0\n" in done.stdout and "upward imports: 0\n" in done.stdout
    assert "in no stage" not in done.stdout and "  plan (" in done.stdout


def test_the_cycle_finder_names_every_member():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert upward_imports({"evals.stats.x": {"evals.plan.y", "evals.errors"},
                           "evals.errors": {"evals.pair"}, "evals.cli": {"evals.stats"}}) == [
        "evals.errors -> evals.pair", "evals.stats.x -> evals.plan.y"]
