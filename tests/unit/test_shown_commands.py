"""Every command shown in a shell block of the README and of docs/getting_started.md is run
by a test (issue 56). The HTML comment above each block says how, one word per command:

- `here`: this file runs it (`nox -s NAME -- ARGS` as the session runs it, `python -m evals
  NAME ARGS`; `nox -s tests -- ARGS` is collected with those arguments, not run: running
  the suite inside itself would recurse);
- `engine`: it starts engines; an engine test names it with
  `@pytest.mark.shown_command(COMMAND, how)`, `how` saying what the test changes (fewer
  items, the engine tests' eager engine);
- `ci`: `.ci/run` runs it.

A block without the comment, a count that does not match, a command no test names: each
fails here.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "docs" / "getting_started.md"]
KINDS = ("here", "engine", "ci")
FENCE = re.compile(r"^```(bash|sh|shell|console)\s*$")
MARK = re.compile(r"^<!-- shown-commands:((?: [a-z]+)*) -->$")


def shown_commands(path: Path) -> list[tuple[str, str]]:
    """(kind, command) of every command line in the page's shell blocks, in order.
    Raises ValueError naming the page and line when a block is unmarked or its marks do not
    match its commands."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for number, line in enumerate(lines):
        if not FENCE.match(line):
            continue
        end = next(i for i in range(number + 1, len(lines)) if lines[i].startswith("```"))
        commands = [c for c in (re.sub(r"\s+#.*$", "", x).strip() for x in lines[number + 1:end])
                    if c and not c.startswith("#")]
        mark = MARK.match(lines[number - 1]) if number else None
        where = f"{path.name}:{number + 1}"
        if mark is None:
            raise ValueError(f"{where}: a shell block without `<!-- shown-commands: ... -->` "
                             "above it")
        kinds = mark.group(1).split()
        if len(kinds) != len(commands) or not set(kinds) <= set(KINDS):
            raise ValueError(f"{where}: {len(commands)} command(s) marked {kinds}; one of "
                             f"{KINDS} per command")
        found += zip(kinds, commands)
    return found


def _all_shown() -> list[tuple[str, str]]:
    return [item for page in PAGES for item in shown_commands(page)]


def _engine_test_names() -> dict[str, list[str]]:
    """command -> the engine tests naming it with @pytest.mark.shown_command(command, how)."""
    named: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests" / "engine").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if (isinstance(deco, ast.Call) and ast.unparse(deco.func) ==
                        "pytest.mark.shown_command"):
                    command, how = (ast.literal_eval(a) for a in deco.args)
                    assert how.strip(), f"{path.name}::{node.name}: say what the test changes"
                    named.setdefault(command, []).append(f"{path.name}::{node.name}")
    return named


def _nox_commands() -> set[str]:
    """The `python -m evals` commands noxfile.py turns into sessions of the same name."""
    tree = ast.parse((REPO / "noxfile.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                ast.unparse(node.targets[0]) in ("ENGINE_COMMANDS", "LIGHT_COMMANDS")):
            names |= set(ast.literal_eval(node.value))
    return names


def _as_run(command: str) -> list[str]:
    """The argv a `here` command runs as in this interpreter."""
    argv = shlex.split(command)
    if argv[:2] == ["python", "-m"]:
        return [sys.executable, *argv[1:]]
    assert argv[:2] == ["nox", "-s"], f"cannot run `{command}` here"
    session, rest = argv[2], argv[3:]
    args = rest[1:] if rest[:1] == ["--"] else rest
    assert rest[:1] in ([], ["--"]), command
    if session == "tests":
        dropped = [a for i, a in enumerate(args) if a == "-n" or (i and args[i - 1] == "-n")]
        kept = [a for a in args if a not in dropped]
        return [sys.executable, "-m", "pytest", *kept, "--collect-only", "-p", "no:cacheprovider"]
    assert session in _nox_commands(), f"`{command}`: no session runs `python -m evals {session}`"
    return [sys.executable, "-m", "evals", session, *args]


def test_every_shell_block_is_marked_and_the_pages_show_commands():
    shown = _all_shown()
    assert ("engine", "nox -s ab") in shown and ("ci", "nox -s tests") in shown
    assert sum(kind == "here" for kind, _ in shown) >= 3


def test_the_check_refuses_an_unmarked_block_and_a_wrong_count(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```bash\nnox -s ab\n```\n")
    with pytest.raises(ValueError, match=r"page.md:3: a shell block without"):
        shown_commands(page)
    page.write_text("<!-- shown-commands: here -->\n```bash\nnox -s ab  # x\n# a comment\n"
                    "nox -s tests\n```\n")
    with pytest.raises(ValueError, match=r"2 command\(s\) marked \['here'\]"):
        shown_commands(page)
    page.write_text("<!-- shown-commands: here gpu -->\n```bash\nnox -s ab\nnox -s tests\n```\n")
    with pytest.raises(ValueError, match="one of"):
        shown_commands(page)


def test_every_engine_command_is_named_by_an_engine_test():
    named = _engine_test_names()
    engine = {command for kind, command in _all_shown() if kind == "engine"}
    assert {c: named.get(c) for c in engine if not named.get(c)} == {}
    # and no engine test names a command the pages no longer show
    assert set(named) <= engine, sorted(set(named) - engine)


def test_every_ci_command_is_a_step_of_ci_run():
    steps = {re.sub(r"^python3? -m ", "", line.strip())
             for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()}
    ci = [command for kind, command in _all_shown() if kind == "ci"]
    assert ci and [c for c in ci if c not in steps] == []


@pytest.mark.parametrize("command", sorted({c for k, c in _all_shown() if k == "here"}))
def test_each_here_command_runs(command):
    argv = _as_run(command)
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (argv, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    if argv[2] == "pytest":  # the quick tier: engine tests deselected, the rest collected
        ids = [line for line in result.stdout.splitlines() if "::" in line]
        assert len(ids) > 1000 and not any(i.startswith("tests/engine/") for i in ids), (
            len(ids), [i for i in ids if i.startswith("tests/engine/")][:3])


def test_the_readme_and_getting_started_show_one_exit_code_table():
    def table(path: Path) -> str:
        text = path.read_text(encoding="utf-8")
        return text[text.index("| code | meaning |"):].split("\n\n", 1)[0]
    assert table(PAGES[0]) == table(PAGES[1])
