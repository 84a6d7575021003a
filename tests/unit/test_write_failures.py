"""A reports or store location that cannot be written: one line naming the path, no
traceback; exit 2 before any engine when known up front, exit 4 when it happens mid-run."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evals import cli

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "cpu" / "aa.yaml"


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nothing can be written to: a read-only tmpfs mount as root (where
    permissions do not stop root), a directory without write permission otherwise."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"root without mount rights here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evals", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)


def test_a_read_only_reports_folder_is_one_line_before_any_engine(read_only_dir):
    with pytest.raises(OSError):  # the fixture really is read-only
        (read_only_dir / "probe").write_text("x")
    result = _cli("ab", str(CONFIG), "--reports", str(read_only_dir / "runs"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"--reports {read_only_dir / 'runs'}: cannot write there" in result.stderr
    assert "starting" not in result.stdout and "worker" not in result.stdout


def test_a_read_only_store_is_one_line_before_any_engine(read_only_dir, tmp_path):
    result = _cli("ab", str(CONFIG), "--reports", str(tmp_path / "r"),
                  "--store", str(read_only_dir))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"--store {read_only_dir}: cannot write there" in result.stderr


def test_a_location_that_fills_up_mid_run_is_exit_4_naming_the_path(monkeypatch, capsys):
    path = "/data/reports/run-1/summary.json"

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setitem(cli.COMMANDS, "ab", full)
    assert cli.main(["ab", str(CONFIG)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"run failed: cannot write {path}: No space left on device" in err


def test_another_os_error_is_still_an_internal_error_with_its_traceback(monkeypatch, capsys):
    def broken(args):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setitem(cli.COMMANDS, "ab", broken)
    assert cli.main(["ab", str(CONFIG)]) == 4
    err = capsys.readouterr().err
    assert "Traceback" in err and "internal error" in err
