"""The suite's own bookkeeping: every engine test file has a stream, and the end-of-run
timeline (tests/engine_streams.py) adds up what the reports say."""

from pathlib import Path

import pytest
from engine_streams import ENGINE_STREAMS, engine_stream, format_unit_times, unit_times

ENGINE_DIR = Path(__file__).resolve().parents[1] / "engine"


def test_every_engine_test_file_has_a_stream_and_every_stream_a_file():
    files = {p.name for p in ENGINE_DIR.glob("test_*.py")}
    assert files == set(ENGINE_STREAMS)
    assert set(ENGINE_STREAMS.values()) == {1, 2, 3}


def test_unit_times_spans_and_sums_each_units_phases():
    t0 = 1000.0
    reports = [  # (nodeid, when, start, stop), in the order a controller may get them
        ("tests/engine/test_history.py::a", "setup", t0 + 5, t0 + 25),
        ("tests/unit/test_x.py::q", "call", t0 + 2, t0 + 3),
        ("tests/engine/test_history.py::a", "call", t0 + 25, t0 + 65),
        ("tests/engine/test_lora.py::b", "call", t0 + 4, t0 + 104),
        ("tests/engine/test_history.py::c", "call", t0 + 70, t0 + 80),
        ("tests/engine/test_history.py::c", "teardown", t0 + 80, t0 + 81.5),
        ("tests/unit/test_y.py::r", "call", t0 + 90, t0 + 90.25),
    ]
    times = unit_times(reports, t0, lambda n: engine_stream(n) or "quick tests")
    assert [t.unit for t in times] == ["tests/engine/#2", "quick tests", "tests/engine/#1"]
    by_unit = {t.unit: t for t in times}
    history = by_unit["tests/engine/#2"]
    assert (history.tests, history.first_start, history.last_stop) == (2, 5, 81.5)
    assert history.busy == pytest.approx(20 + 40 + 10 + 1.5)
    quick = by_unit["quick tests"]
    assert (quick.tests, quick.first_start, quick.last_stop) == (2, 2, 90.25)
    assert quick.busy == pytest.approx(1.25)
    assert format_unit_times(times)[0] == "tests/engine/#2: 2 tests from 5 s to 82 s (72 s in tests)"


def test_no_reports_no_units():
    assert unit_times([], 0.0, str) == []


def test_test_file_names_are_unique():
    """The test folders have no __init__.py, so pytest imports each test file by its base
    name: two files of one name in two folders stop the collection of the second (seen in
    CI with tests/unit/ and tests/engine/test_reuse_key.py)."""
    names = [p.name for p in ENGINE_DIR.parent.rglob("test_*.py")]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    assert len(names) > 100 and duplicated == [], duplicated
