"""`python -m evals record|runs|pin|history`: output, exit codes, errors without tracebacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from synthetic_runs import FIXTURE

from evals.cli import main
from evals.errors import UserError


@pytest.fixture
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"


def test_record_runs_pin_history(tmp_path, store_dir, capsys):
    run = Path(shutil.copytree(FIXTURE, tmp_path / "reports" / FIXTURE.name))
    assert main(["record", str(run), "--store", str(store_dir)]) == 0
    assert "recorded cpu-w4a16-870a75c5 (deployment cpu-w4a16)" in capsys.readouterr().out

    assert main(["runs", "--store", str(store_dir)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["run", "date", "(UTC)", "kind", "config", "deployment", "verdict"]
    assert row.split() == ["cpu-w4a16-870a75c5", "2026-11-30", "03:12", "ab", "cpu-w4a16",
                           "cpu-w4a16", "REGRESSION"]

    assert main(["pin", "cpu-w4a16-870a75c5", "--deployment", "cpu-w4a16",
                 "--store", str(store_dir)]) == 0
    capsys.readouterr()
    assert main(["runs", "--deployment", "cpu-w4a16", "--store", str(store_dir)]) == 0
    assert "REGRESSION (golden)" in capsys.readouterr().out

    out = tmp_path / "reports" / "history.html"
    assert main(["history", "--out", str(out), "--store", str(store_dir)]) == 0
    assert capsys.readouterr().out.strip() == f"history: {out}"
    assert f'href="./{FIXTURE.name}/report.html"' not in out.read_text()  # no report yet
    (run / "report.html").write_text("<p>report</p>")
    main(["history", "--out", str(out), "--store", str(store_dir)])
    assert f'href="./{FIXTURE.name}/report.html"' in out.read_text()


def test_store_from_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EVALS_STORE", str(tmp_path / "env-store"))
    assert main(["runs"]) == 0
    assert f"no runs recorded in {tmp_path / 'env-store'}" in capsys.readouterr().out
    assert main(["history"]) == 0  # written next to the store directory
    assert capsys.readouterr().out.strip() == f"history: {tmp_path / 'history.html'}"


def test_errors_are_one_line_with_exit_code_2(tmp_path, store_dir, capsys):
    assert main(["pin", "nope", "--deployment", "d", "--store", str(store_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run 'nope' is not in the store") and "Traceback" not in err
    store_dir.mkdir()
    (store_dir / "index.sqlite").write_bytes(b"garbage" * 100)
    assert main(["runs", "--store", str(store_dir)]) == 2
    assert f"{store_dir / 'index.sqlite'}: not a readable SQLite index" in capsys.readouterr().err
    assert main(["runs", "--limit", "0", "--store", str(store_dir)]) == 2


def test_runs_marks_a_broken_run(tmp_path, store_dir, capsys):
    main(["record", str(FIXTURE), "--store", str(store_dir)])
    manifest = store_dir / "runs" / "cpu-w4a16-870a75c5" / "manifest.json"
    manifest.write_text("{")
    capsys.readouterr()
    assert main(["runs", "--store", str(store_dir)]) == 0
    captured = capsys.readouterr()
    assert "BROKEN" in captured.out
    assert f"broken: {manifest}: not valid JSON" in captured.err


def test_a_pinned_golden_run_is_never_replaced_and_record_refuses_to_overwrite(tmp_path):
    """Finding: rerunning on the same paths with new content replaced a pinned golden run's
    record (REGRESSION became PASS). Now the same id with another result is refused."""
    import json
    import shutil
    import subprocess
    import sys

    from evals.store import RunStore

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_run"
    reports, store_dir = tmp_path / "r", tmp_path / "store"
    subprocess.run([sys.executable, "-m", "evals", "compare", str(fixture), str(fixture),
                    "--reports", str(reports), "--store", str(store_dir)], check=False,
                   capture_output=True, cwd=fixture.parents[2], timeout=120)
    run_dir = next(reports.glob("compare-*"))
    store = RunStore(store_dir)
    run_id = run_dir.name
    deployment = store.get(run_id).entry.deployment
    store.pin(run_id, deployment)
    changed = tmp_path / "changed"
    shutil.copytree(run_dir, changed)
    summary = json.loads((changed / "summary.json").read_text())
    summary.update(created="2030-01-01T00:00:00+00:00", verdict="PASS")
    (changed / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(UserError, match="pinned golden run"):
        store.record_run(changed)
    assert store.golden(deployment).created != "2030-01-01T00:00:00+00:00"
    result = subprocess.run([sys.executable, "-m", "evals", "record", str(changed), "--store",
                             str(store_dir)], capture_output=True, text=True,
                            cwd=fixture.parents[2], timeout=120)
    assert result.returncode == 2 and "never replaced" in result.stderr
