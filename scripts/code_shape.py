"""The shape of evals/: each stage's modules, import cycles, imports that run back up the
stage order, the largest modules and the longest functions. The import graph (module-level
and function-level imports, `from x import y` read as the module x.y where there is one)
and the stage order are the ones tests/unit/test_layering.py states and checks: whole
folders per stage, shared only the top-level leaf modules, no other allowance; a figure
here and a failure there speak of the same thing.

Exits 1 when there is an import cycle, an import of a later stage, or a module in no stage.

Usage:
    python scripts/code_shape.py [--most 10]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERING = ROOT / "tests" / "unit" / "test_layering.py"


def _layering():
    spec = importlib.util.spec_from_file_location("test_layering", LAYERING)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def module_lines(sources: dict[str, Path]) -> list[tuple[int, str]]:
    return sorted(((len(p.read_text(encoding="utf-8").splitlines()), m)
                   for m, p in sources.items()), reverse=True)


def function_lines(sources: dict[str, Path]) -> list[tuple[int, str]]:
    """Every function and method (nested ones too), from its `def` to its last line."""
    found = []
    for module, path in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        todo = [(tree, "")]
        while todo:
            node, prefix = todo.pop()
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}."
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.append((child.end_lineno - child.lineno + 1,
                                  f"{module}:{name.rstrip('.')}"))
                todo.append((child, name))
    return sorted(found, reverse=True)


def stage_modules(layering, sources) -> list[tuple[str, list[str]]]:
    """(stage, its modules) in the stated order, the shared modules first."""
    rows = [("shared", sorted(m for m in sources if layering.stage_of(m) is None))]
    rows += [(name, sorted(m for m in sources if layering.stage_of(m) == place))
             for place, (name, _) in enumerate(layering.STAGES)]
    return rows + [("in no stage", sorted(m for m in sources if layering.stage_of(m) == -1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--most", type=int, default=10, help="rows of the size tables")
    args = parser.parse_args(argv)
    layering = _layering()
    sources = layering._sources()
    graph = layering.import_graph()
    cycles = layering.cycles(graph)
    upward = layering.upward_imports(graph)
    print(f"modules: {len(sources)}, import edges: {sum(map(len, graph.values()))}")
    print("stages, in order:")
    for stage, modules in stage_modules(layering, sources):
        if modules or stage != "in no stage":
            print(f"  {stage} ({len(modules)}): {' '.join(m.removeprefix('evals.') for m in modules)}")
    print(f"import cycles: {len(cycles)}")
    for members in cycles:
        print(f"  {len(members)}: {' '.join(members)}")
    print(f"upward imports: {len(upward)}")
    for arrow in upward:
        print(f"  {arrow}")
    print(f"largest modules (lines, total {sum(n for n, _ in module_lines(sources))}):")
    for n, module in module_lines(sources)[:args.most]:
        print(f"  {n:5d} {module}")
    print("longest functions (lines):")
    for n, name in function_lines(sources)[:args.most]:
        print(f"  {n:5d} {name}")
    unplaced = stage_modules(layering, sources)[-1][1]
    return 1 if cycles or upward or unplaced else 0


if __name__ == "__main__":
    raise SystemExit(main())
