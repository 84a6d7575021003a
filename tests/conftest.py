"""Puts tests/ on the import path, for helpers shared by several test folders
(`synthetic_runs`), and marks the tiers: `engine` (tests/engine: real vLLM engines) and
`browser` (tests that drive headless Chromium). The quick tier is `-m "not engine"`.

Engines start one at a time on this machine: every test session sets the machine's engine
lock (evals.runner.engine_lock), so an engine of one pytest worker waits for another's.
Under pytest-xdist (`nox -s tests` runs `-n 4 --dist loadscope`) the engine tests form three
work units (`ENGINE_STREAMS`), one per worker, whose imports, audits and analyses overlap
the others' engines; the fourth worker runs the quick tests, on the core a stream waiting
for its engine turn leaves idle. The quick tests run at a lower priority (`QUICK_NICENESS`): the
engine streams set the wall time, so a quick test takes only the CPU they leave, instead of
slowing the streams by a third while the quick tests run first and leaving a core idle at
the end, when the quick tests are done and one stream runs alone.

The tests run with the CI systems' variables removed (the suite writes a job summary,
annotations and a dotenv when it sees them, evals.report.ci_outputs); a test that checks
those outputs sets them itself."""

import os
import tempfile
import time
from pathlib import Path

import pytest
from stream_times import format_unit_times, unit_times

CI_VARIABLES = ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITLAB_CI",
                "EVALS_DOTENV")


# one lock file for every test session on this machine (both xdist workers, and a second
# checkout's suite): never two engines at once
ENGINE_LOCK = Path(tempfile.gettempdir()) / "evals-tests-engine.lock"


@pytest.fixture(scope="session", autouse=True)
def outside_ci():
    patch = pytest.MonkeyPatch()
    for name in CI_VARIABLES:
        patch.delenv(name, raising=False)
    patch.setenv("EVALS_ENGINE_LOCK", os.environ.get("EVALS_ENGINE_LOCK") or str(ENGINE_LOCK))
    yield
    patch.undo()


ENGINE_TESTS = "tests/engine/"
# The engine tests' three streams, by file. A stream's tests share one session (its run
# store, the shared A/B, the degraded model), so files that reuse each other's runs stay
# together: stream 1 holds the shared baseline's users, stream 3 files that use only their
# own runs. Balanced by measured time (with the quick tests niced, on a 2-core Xeon: stream 1
# 616 s and stream 2 708 s of tests before the LoRA and engine-exit tests, 58 s, moved to
# stream 1; with two streams, at 497 s and 505 s, the last 1-2 minutes ran on one core once
# the quick tests had ended, so the Ray, logprob-shift, hybrid-model and serving tests became
# stream 3: 473 s, 435 s and 414 s).
ENGINE_STREAMS = {
    "test_ab_end_to_end.py": 1, "test_embedded_model.py": 1, "test_study.py": 1,
    "test_config_audit.py": 1, "test_structured_output.py": 1, "test_serving.py": 3,
    "test_lora.py": 1, "test_engine_exit.py": 1, "test_model_inspection.py": 1,
    "test_fork_preload.py": 1,
    "test_fault_canaries.py": 2, "test_history.py": 2, "test_ci_examples.py": 2,
    "test_ray_executor.py": 3, "test_logprob_shift.py": 3, "test_hybrid_model.py": 3,
}


def engine_stream(nodeid: str) -> str | None:
    """The work unit of an engine test (`tests/engine/#1` or `#2`); None for other tests.
    A file missing from ENGINE_STREAMS joins stream 2."""
    if not nodeid.startswith(ENGINE_TESTS):
        return None
    name = nodeid[len(ENGINE_TESTS):].split("::")[0]
    return f"{ENGINE_TESTS}#{ENGINE_STREAMS.get(name, 2)}"


QUICK_NICENESS = 10
# os.nice only raises the niceness without privileges: a worker lowers itself once, at its
# first quick test; a stream's worker runs its whole stream first (it is the first unit it is
# sent, and pytest-xdist queues more only when two of its tests are left)


def pytest_runtest_setup(item):
    if os.environ.get("PYTEST_XDIST_WORKER") and engine_stream(item.nodeid) is None:
        now = os.nice(0)
        if now < QUICK_NICENESS:
            os.nice(QUICK_NICENESS - now)


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.startswith(ENGINE_TESTS):
            item.add_marker(pytest.mark.engine)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist is optional: without it the tests run in one process
    pass
else:
    class EngineStreams(LoadScopeScheduling):
        """The engine tests in three work units (ENGINE_STREAMS), each run in order by one
        worker with its session fixtures; every other test is a unit of its own. The
        biggest units go out first, so the first three workers start on an engine stream
        and any other worker on the quick tests. pytest-xdist's
        own `xdist_group` mark does not group under pytest 9 (it renames node ids, which
        pytest 9 no longer reads back)."""

        def _split_scope(self, nodeid: str) -> str:
            return engine_stream(nodeid) or nodeid

    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "loadscope":
            return EngineStreams(config, log)
        return None


# when each unit ran (tests/stream_times.py), printed at the end of every run: the streams'
# balance differs between CPU kinds
_PHASES: list[tuple[str, str, float, float]] = []
_SESSION_START: list[float] = []


def pytest_sessionstart(session):
    _SESSION_START.append(time.time())


def pytest_runtest_logreport(report):
    if os.environ.get("PYTEST_XDIST_WORKER") or not report.start:
        return  # the controller collects every worker's reports
    _PHASES.append((report.nodeid, report.when, report.start, report.stop))


def pytest_terminal_summary(terminalreporter):
    if not _PHASES or not _SESSION_START:
        return
    times = unit_times(_PHASES, _SESSION_START[0],
                       lambda nodeid: engine_stream(nodeid) or "quick tests")
    terminalreporter.write_sep("=", "when each unit ran (tests/conftest.py ENGINE_STREAMS)")
    for line in format_unit_times(times):
        terminalreporter.write_line(line)
