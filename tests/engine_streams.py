"""The engine tests' work units, and when each unit of a run ran.

`ENGINE_STREAMS`: under pytest-xdist the engine tests form three streams, one per worker
(tests/conftest.py schedules them), balanced by measured time. The balance differs between
CPU kinds (on AVX2 the engines run float32 kernels, and every test is slower by a factor of
its own), so every run prints, after pytest's slowest durations, each unit's first start,
last end and the seconds its tests took, from the test reports' own timestamps
(`TestReport.start` and `.stop`, which pytest-xdist carries back from the workers): the
stream that ends last sets the suite's wall time.
"""

from __future__ import annotations

from dataclasses import dataclass

ENGINE_TESTS = "tests/engine/"
# The engine tests' three streams, by file. A stream's tests share one session (its run
# store, the shared A/B, the degraded model), so files that reuse each other's runs stay
# together: stream 1 holds the shared baseline's users, stream 3 files that use only their
# own runs. Balanced by measured time (with the quick tests niced, on a 2-core Xeon: stream 1
# 616 s and stream 2 708 s of tests before the LoRA and engine-exit tests, 58 s, moved to
# stream 1; with two streams, at 497 s and 505 s, the last 1-2 minutes ran on one core once
# the quick tests had ended, so the Ray, logprob-shift, hybrid-model and serving tests became
# stream 3: 473 s, 435 s and 414 s). With this session's recall, sampling and sweep-reuse
# tests, a fresh-clone `.ci/run` on a 2-core AMD EPYC with AVX-512 ended the streams at
# 573 s, 616 s and 764 s, so the Ray test (about 100 s, its own runs) moved to stream 1.
# In 5 of 9 fresh-clone runs since (sessions 31-32, same CPU kind) stream 3 still ended last,
# by 53-138 s (694 / 763 / 832 s at 25df59d), so the sampled canary (its own runs, about
# 70 s) moved to stream 1.
ENGINE_STREAMS = {
    "test_ab_end_to_end.py": 1, "test_embedded_model.py": 1, "test_study.py": 1,
    "test_config_audit.py": 1, "test_structured_output.py": 1, "test_serving.py": 3,
    "test_lora.py": 1, "test_engine_exit.py": 1, "test_model_inspection.py": 1,
    "test_fault_canaries.py": 2, "test_history.py": 2, "test_ci_examples.py": 2,
    "test_secret_env_ab.py": 2, "test_recall_waves.py": 2, "test_sampled_repeats.py": 2,
    "test_ray_executor.py": 1, "test_logprob_shift.py": 3, "test_hybrid_model.py": 3,
    "test_reuse_key_engine.py": 3, "test_load_sweep.py": 3,
    # issue 53's sampled canary (four eager engine starts, 40 items x 8 repeats), its greedy
    # twin (three more) and the workaround's refusal: 45 s together on a 2-core AMD EPYC, alone
    "test_sampled_canary.py": 1,
}


def engine_stream(nodeid: str) -> str | None:
    """The work unit of an engine test (`tests/engine/#1`, `#2` or `#3`); None for other tests.
    A file missing from ENGINE_STREAMS joins stream 2."""
    if not nodeid.startswith(ENGINE_TESTS):
        return None
    name = nodeid[len(ENGINE_TESTS):].split("::")[0]
    return f"{ENGINE_TESTS}#{ENGINE_STREAMS.get(name, 2)}"


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
