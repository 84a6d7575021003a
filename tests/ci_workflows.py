"""The CI examples (examples/ci/) the way the tests run them, without a CI runner.

- Workflow files are read as YAML 1.2, as GitHub and GitLab read them (`on` is a key, not
  the boolean PyYAML's YAML 1.1 makes of it).
- A `nox` shim put first on PATH turns `nox -s NAME -- ARGS` into `python -m evals NAME
  ARGS` in this interpreter, so a step runs the workflow's own commands against the
  package under test without building nox virtualenvs.
- A GitHub step's `run:` runs as the runner runs it (`bash --noprofile --norc -eo
  pipefail`), with the workflow's, job's and step's `env:` merged; the test plays the
  runner's part for values that are expressions (`${{ ... }}`) and for the variables the
  runner sets (GITHUB_ACTIONS, GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, GITHUB_RUN_ID).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "ci"
GITHUB = EXAMPLES / "github"
GITLAB = EXAMPLES / "gitlab" / ".gitlab-ci.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 booleans: only true/false, never on/off/yes/no."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def load_yaml(path: Path) -> dict:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=Yaml12Loader)


def nox_shim(directory: Path) -> Path:
    """Writes directory/nox; returns the directory (to put first on PATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "nox"
    shim.write_text(f"""#!/usr/bin/env bash
# test shim: `nox -s NAME -- ARGS` runs `python -m evals NAME ARGS` (noxfile.py's run_suite)
if [ "${{1:-}}" != "-s" ] || [ $# -lt 2 ]; then
    echo "nox shim: expected -s SESSION [-- ARGS], got: $*" >&2
    exit 99
fi
session=$2
shift 2
if [ "${{1:-}}" = "--" ]; then shift; fi
cd "{REPO}" && exec "{sys.executable}" -m evals "$session" "$@"
""", encoding="utf-8")
    shim.chmod(0o755)
    return directory


def github_step(workflow: dict, job: str, step_id: str) -> dict:
    (step,) = [s for s in workflow["jobs"][job]["steps"] if s.get("id") == step_id]
    return step


def step_environment(workflow: dict, job: str, step: dict, values: dict[str, str]) -> dict:
    """The step's `env:` as the runner builds it (workflow, then job, then step). Every
    value that is an expression must be in `values`; `values` may override any other."""
    merged = {**workflow.get("env", {}), **workflow["jobs"][job].get("env", {}),
              **step.get("env", {})}
    unresolved = sorted(k for k, v in merged.items()
                        if EXPRESSION.search(str(v)) and k not in values)
    assert not unresolved, f"the test must give values for {unresolved}"
    return {**{k: str(v) for k, v in merged.items()}, **values}


def runner_environment(tmp: Path, run_id: str, shim_dir: Path) -> dict:
    """What a GitHub runner sets for a step, on top of this process's environment."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(GITHUB_ACTIONS="true", GITHUB_RUN_ID=run_id,
               GITHUB_STEP_SUMMARY=str(tmp / "step_summary.md"),
               GITHUB_OUTPUT=str(tmp / "github_output"),
               PATH=f"{shim_dir}{os.pathsep}{env.get('PATH', '')}")
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):
        Path(env[name]).write_text("", encoding="utf-8")
    return env


def run_step(step: dict, env: dict, timeout: float = 3000) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def step_outputs(env: dict) -> dict[str, str]:
    """The `key=value` lines a step wrote to $GITHUB_OUTPUT (a later line wins)."""
    lines = Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def expand(text: str, env: dict, outputs: dict[str, dict[str, str]]) -> str:
    """`${{ env.X }}` and `${{ steps.ID.outputs.KEY }}` in a `with:` value."""
    def value(match: re.Match) -> str:
        expression = match.group(1)
        if expression.startswith("env."):
            return env[expression[4:]]
        step, _, key = expression.removeprefix("steps.").partition(".outputs.")
        return outputs[step][key]
    return EXPRESSION.sub(value, text)


def uploaded_paths(workflow: dict, job: str, env: dict, outputs: dict) -> list[Path]:
    """The files the job's upload-artifact step would find (its `path:` lines expanded)."""
    (upload,) = [s for s in workflow["jobs"][job]["steps"]
                 if "upload-artifact" in s.get("uses", "")]
    lines = [line.strip() for line in upload["with"]["path"].splitlines() if line.strip()]
    return [Path(p) for line in lines for p in glob.glob(expand(line, env, outputs))]


def _unescape(text: str) -> str:
    for escaped, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, raw)
    return text


ANNOTATION = re.compile(r"^::(error|warning|notice) title=([^:]*)::(.*)$")


def annotations(stdout: str) -> list[tuple[str, str, str]]:
    """GitHub workflow-command annotations on stdout: (level, title, message), unescaped."""
    found = []
    for line in stdout.splitlines():
        match = ANNOTATION.match(line)
        if match:
            found.append((match.group(1), _unescape(match.group(2)), _unescape(match.group(3))))
    return found


class ActionsCache:
    """actions/cache as the weekly drift uses it: the saved state is restored to its
    absolute path before the step and saved after it (always); the next run's workspace
    starts empty, so nothing but the cache carries the state from one week to the next."""

    def __init__(self, state: Path, workspace: Path, saved: Path):
        self.state, self.workspace, self.saved = state, workspace, saved

    def restore(self) -> None:
        if self.saved.exists():
            shutil.copytree(self.saved, self.state)

    def save(self) -> None:
        shutil.rmtree(self.saved, ignore_errors=True)
        shutil.copytree(self.state, self.saved)
        shutil.rmtree(self.workspace)


def drift_week(workflow: dict, cache: ActionsCache, runner_dir: Path, run_id: str,
               shim_dir: Path, values: dict) -> tuple[subprocess.CompletedProcess, dict]:
    """One scheduled run of weekly-drift.yml's `drift` step between restore and save;
    returns the step's result and its environment."""
    step = github_step(workflow, "drift", "drift")
    cache.restore()
    env = runner_environment(runner_dir, run_id, shim_dir)
    env.update(step_environment(workflow, "drift", step, values))
    result = run_step(step, env)
    return result, env


def state_path(workflow: dict, workspace: Path, deployment: str) -> Path:
    """weekly-drift.yml's EVALS_STATE for a workspace and a matrix deployment."""
    value = workflow["jobs"]["drift"]["env"]["EVALS_STATE"]
    value = value.replace("${{ github.workspace }}", str(workspace))
    value = value.replace("${{ matrix.deployment }}", deployment)
    assert "${{" not in value, value
    return Path(value)
