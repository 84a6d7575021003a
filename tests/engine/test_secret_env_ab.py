"""Secrets in an arm's environment never reach a record, report, log, store entry or CI
output, while the arm's processes still get their real values (evals.plan.secret_env)."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from engine_helpers import CPU_ENV, ENGINE, REPO, write_config

from evals.runner.fork_server import FORK_SERVER_ENV

TOKEN_NAME = "PROBE_SECRET_TOKEN"  # a built-in word; read by the fork server's imports too
URL_NAME = "EVALS_PROBE_PRIVATE_URL"  # a secret through the config's `secret_env_names`
TASK = "tiny_addition_secret_probe"

# the probe task: the embedded addition items, loaded only where both variables hold one of
# the values the test set (by their sha256): a worker that got a marker fails its task
PROBE = '''
import hashlib
import os

import datasets

EXPECTED = {expected!r}


def addition(**_kwargs):
    for name, digests in EXPECTED.items():
        value = os.environ.get(name, "")
        if hashlib.sha256(value.encode()).hexdigest() not in digests:
            raise RuntimeError(f"{{name}} is not a value the test set")
    return datasets.DatasetDict(
        {{"test": datasets.Dataset.from_json({data!r})}})
'''


def _probe_task(folder: Path, expected: dict[str, list[str]]) -> Path:
    folder.mkdir()
    data = str(REPO / "tasks" / "embedded" / "data" / "addition_test.jsonl")
    (folder / "secret_probe.py").write_text(PROBE.format(expected=expected, data=data),
                                            encoding="utf-8")
    task = (REPO / "tasks" / "embedded" / "tiny_addition.yaml").read_text(encoding="utf-8")
    task = task.replace("task: tiny_addition", f"task: {TASK}").replace(
        "data_loader.addition", "secret_probe.addition").replace("tag:\n- embedded_tiny\n", "")
    (folder / f"{TASK}.yaml").write_text(task, encoding="utf-8")
    return folder


def _files_holding(roots: list[Path], values: list[str]) -> list[str]:
    found = []
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                found += [f"{path} holds {v!r}" for v in values if v.encode() in data]
    return found


def test_secret_values_reach_the_arms_and_no_file_or_output(tmp_path, fork_servers):
    """Baseline (offline) sets the token inline, the candidate (`vllm serve`) reads it with
    `env_from`; both set a private URL that `secret_env_names` makes a secret, to different
    values. The run finishes (the probe task loads only with the real values), warns about
    the inline token, and no file the run wrote (reports, run store, fork-server logs, CI
    outputs) nor its output holds any of the values; spec.json and summary.json keep the
    names with a marker."""
    token = f"hf_{secrets.token_hex(12)}"
    urls = [f"https://{secrets.token_hex(8)}.example/{arm}" for arm in ("base", "cand")]
    digests = {TOKEN_NAME: [hashlib.sha256(token.encode()).hexdigest()],
               URL_NAME: [hashlib.sha256(u.encode()).hexdigest() for u in urls]}
    tasks = _probe_task(tmp_path / "tasks", digests)
    plain = {**ENGINE, "enable_prefix_caching": False}
    config = write_config(
        tmp_path, "secrets",
        {"engine": plain, "env": {**CPU_ENV, TOKEN_NAME: token, URL_NAME: urls[0]}},
        {"engine": plain, "mode": "server", "concurrency": 2,
         "env": {**CPU_ENV, URL_NAME: urls[1]}, "env_from": [TOKEN_NAME]},
        tasks=[{"name": TASK, "metric": "exact_match"}], limit=5,
        include_path=str(tasks), secret_env_names=["PRIVATE_URL"],
        intended_change=["env", "mode"])
    reports, store = tmp_path / "reports", tmp_path / "store"
    ci = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary.md"),
          "GITLAB_CI": "true", "EVALS_DOTENV": str(tmp_path / "verdict.env")}
    env = {**os.environ, TOKEN_NAME: token, **ci}
    result = subprocess.run([sys.executable, "-m", "evals", "ab", str(config), "--reports",
                             str(reports), "--store", str(store)], capture_output=True,
                            text=True, cwd=REPO, env=env, timeout=1500)
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1, 3), output[-5000:]
    # one warning per arm that sets a secret inline, naming them and `env_from`
    assert (f"arms.baseline.env sets {URL_NAME}, {TOKEN_NAME} inline" in output
            and f"env_from: [{URL_NAME}, {TOKEN_NAME}]" in output), output[:3000]
    assert f"arms.candidate.env sets {URL_NAME} inline" in output, output[:3000]

    values = [token, *urls]
    assert not [v for v in values if v in output], output[-5000:]
    roots = [reports, store, Path(os.environ[FORK_SERVER_ENV]),
             tmp_path / "step_summary.md", tmp_path / "verdict.env"]
    assert (tmp_path / "step_summary.md").is_file() and (tmp_path / "verdict.env").is_file()
    assert _files_holding(roots, values) == []

    (run_dir,) = [p.parent for p in reports.glob("*/summary.json")]
    for arm in ("baseline", "candidate"):
        recorded = json.loads((run_dir / "arms" / arm / "spec.json").read_text("utf-8"))["env"]
        assert recorded[TOKEN_NAME].startswith("<redacted pbkdf2-sha256:")
        assert recorded[URL_NAME].startswith("<redacted pbkdf2-sha256:")
        assert recorded["VLLM_CPU_KVCACHE_SPACE"] == CPU_ENV["VLLM_CPU_KVCACHE_SPACE"]
    assert (run_dir / "arms" / "candidate" / "server.log").is_file()
    summary = json.loads((run_dir / "summary.json").read_text("utf-8"))
    arms = summary["config"]["arms"]
    assert arms["baseline"]["env"][TOKEN_NAME].startswith("<redacted ")
    assert arms["candidate"]["env_from"] == [TOKEN_NAME]
    assert all(t["n"] == 5 for t in summary["tasks"])
