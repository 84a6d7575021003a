"""When each work unit of the suite ran: the engine streams and the quick tests.

The suite's wall time is set by whichever engine stream ends last (tests/conftest.py), and
the streams are balanced by measured time, which differs between CPU kinds (on AVX2 the
engines run float32 kernels, and every test is slower by a different factor). So every run
prints, after pytest's slowest durations, each unit's first start, last end and the seconds
its tests took, from the test reports' own timestamps (`TestReport.start` and `.stop`, which
pytest-xdist carries back from the workers).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UnitTime:
    unit: str
    tests: int
    first_start: float  # seconds from the session's start
    last_stop: float
    busy: float  # the sum of its tests' setup, call and teardown times


def unit_times(reports, session_start: float, unit_of) -> list[UnitTime]:
    """`reports`: (nodeid, when, start, stop) of every test phase; `unit_of(nodeid)`: the
    unit's name. Units in the order they ended."""
    spans: dict[str, list] = {}
    for nodeid, _when, start, stop in reports:
        span = spans.setdefault(unit_of(nodeid), [set(), start, stop, 0.0])
        span[0].add(nodeid)
        span[1] = min(span[1], start)
        span[2] = max(span[2], stop)
        span[3] += stop - start
    times = [UnitTime(unit, len(nodes), first - session_start, last - session_start, busy)
             for unit, (nodes, first, last, busy) in spans.items()]
    return sorted(times, key=lambda t: t.last_stop)


def format_unit_times(times: list[UnitTime]) -> list[str]:
    return [f"{t.unit}: {t.tests} tests from {t.first_start:.0f} s to {t.last_stop:.0f} s "
            f"({t.busy:.0f} s in tests)" for t in times]
