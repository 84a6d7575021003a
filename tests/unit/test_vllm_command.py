"""Which `vllm` a server-mode arm runs (evals.runner.server.vllm_command): this
interpreter's, never another environment's from PATH."""

from __future__ import annotations

import importlib.util
from importlib.metadata import entry_points

from evals.runner.server import vllm_command


def test_the_script_beside_the_interpreter_is_used(tmp_path):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    (python.parent / "vllm").write_text("#!/bin/sh\n", encoding="utf-8")
    assert vllm_command(str(python)) == [str(python.parent / "vllm")]


def test_without_a_script_the_interpreter_runs_vllms_cli_module(tmp_path, monkeypatch):
    # a `pip install --target` install: scripts in a folder off PATH; a `vllm` on PATH
    # (here a decoy) belongs to some other environment and is not taken
    decoy = tmp_path / "elsewhere"
    decoy.mkdir()
    (decoy / "vllm").write_text("#!/bin/sh\n", encoding="utf-8")
    (decoy / "vllm").chmod(0o755)
    monkeypatch.setenv("PATH", str(decoy))
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    command = vllm_command(str(python))
    assert command == [str(python), "-m", "vllm.entrypoints.cli.main"]
    assert importlib.util.find_spec(command[2]) is not None  # the module the CLI's script runs


def test_the_module_is_what_vllms_own_script_runs():
    scripts = [e for e in entry_points(group="console_scripts") if e.name == "vllm"]
    assert scripts and scripts[0].value == "vllm.entrypoints.cli.main:main"
