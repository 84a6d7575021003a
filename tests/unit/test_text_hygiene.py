"""Control characters from a run's data (here: in a task name, which comes from the
samples file name) reach no output raw: the terminal table, summary.md, junit.xml (still
parseable XML) and report.html show escapes instead of ANSI sequences or bidi overrides."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

from lxml import etree

from evals.cli import main
from evals.text_hygiene import visible

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_run"
HOSTILE = "gen\x1b[31m\u202eNOISSERGER\x07"


def test_visible_escapes_controls_and_bidi_but_not_text():
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("x\u202ey\u2066z") == "x\\u202ey\\u2066z"
    assert visible("line\nnext\ttab") == "line\nnext\ttab"
    assert visible("שלום مرحبا naïve") == "שלום مرحبا naïve"


def _hostile_copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURE, target)
    for path in target.rglob("samples_tiny_reviews_gen_*.jsonl"):
        path.rename(path.with_name(path.name.replace("tiny_reviews_gen", HOSTILE)))
    return target


def test_a_hostile_task_name_reaches_no_output_raw(tmp_path):
    a, b = _hostile_copy(tmp_path, "a"), _hostile_copy(tmp_path, "b")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["compare", str(a), str(b), "--reports", str(tmp_path / "r")])
    assert code in (0, 3), err.getvalue()
    run_dir = next((tmp_path / "r").glob("compare-*"))
    texts = {"stdout": out.getvalue(), "stderr": err.getvalue()}
    for name in ("summary.md", "junit.xml", "report.html"):
        texts[name] = (run_dir / name).read_text(encoding="utf-8")
    for where, text in texts.items():
        assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text, where
    assert "gen\\x1b[31m\\u202eNOISSERGER\\x07" in texts["stdout"]
    etree.fromstring((run_dir / "junit.xml").read_bytes())  # well-formed
