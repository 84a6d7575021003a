"""The configs a pull request changed, as a JSON list: the release gate's job matrix.

usage: python3 examples/ci/changed_configs.py BASE_REF   (e.g. origin/main)

A config is a YAML file under configs/ with a top-level `name:` (files like base.yaml,
which only hold shared settings, name no run). Listed are the configs that changed
between BASE_REF and HEAD (added, modified or renamed; deleted ones cannot run) and every
config that `extends:` a changed file, directly or through another. Standard library
only: it runs before any virtualenv exists. Exit 2 on a git error.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

CONFIGS = "configs"
_TOP_LEVEL = re.compile(r"^(name|extends):[ \t]*(.*?)[ \t]*(?:#.*)?$", re.MULTILINE)


def _top_level(path: Path) -> dict[str, str]:
    """The file's top-level `name:` and `extends:` values (quotes removed)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return {key: value.strip("'\"") for key, value in _TOP_LEVEL.findall(text)}


def changed_files(base_ref: str, root: Path) -> set[Path]:
    result = subprocess.run(
        ["git", "diff", "--name-only", "--diff-filter=ACMR", f"{base_ref}...HEAD", "--", CONFIGS],
        cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"git diff against {base_ref} failed: {result.stderr.strip()}")
    return {(root / line).resolve() for line in result.stdout.splitlines() if line.strip()}


def changed_configs(base_ref: str, root: Path) -> list[str]:
    root = root.resolve()
    changed = changed_files(base_ref, root)
    files = sorted(p.resolve() for p in (root / CONFIGS).rglob("*")
                   if p.suffix in (".yaml", ".yml") and p.is_file())
    keys = {p: _top_level(p) for p in files}
    parents = {p: (p.parent / keys[p]["extends"]).resolve() for p in files if keys[p].get("extends")}
    affected = set(changed) & set(files)
    grew = True
    while grew:  # a config whose base (or its base's base) changed changed too
        grew = False
        for child, parent in parents.items():
            if parent in affected and child not in affected:
                affected.add(child)
                grew = True
    return [str(p.relative_to(root)) for p in files if p in affected and keys[p].get("name")]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        configs = changed_configs(argv[0], Path.cwd())
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(configs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
