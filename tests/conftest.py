"""Puts tests/ on the import path, for helpers shared by several test folders
(`synthetic_runs`), and marks the tiers: `engine` (tests/engine: real vLLM engines) and
`browser` (tests that drive headless Chromium). The quick tier is `-m "not engine"`.

Engines start one at a time on this machine: every test session sets the machine's engine
lock (evals.runner.engine_lock), so an engine of one pytest worker waits for another's.
Under pytest-xdist (`nox -s tests` runs `-n 4 --dist loadscope`) the engine tests form three
work units (`ENGINE_STREAMS` in tests/engine_streams.py), one per worker, whose imports,
audits and analyses overlap the others' engines; the fourth worker runs the quick tests, on
the core a stream waiting for its engine turn leaves idle. The quick tests run at a lower
priority (`QUICK_NICENESS`): the engine streams set the wall time, so a quick test takes
only the CPU they leave, instead of slowing the streams by a third while the quick tests run
first and leaving a core idle at the end, when the quick tests are done and one stream runs
alone.

The tests run with the CI systems' variables removed (the suite writes a job summary,
annotations and a dotenv when it sees them, evals.report.ci_outputs); a test that checks
those outputs sets them itself."""

import os
import tempfile
import time
from pathlib import Path

import pytest
from engine_streams import ENGINE_TESTS, engine_stream, format_unit_times, unit_times

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


# when each unit ran (tests/engine_streams.py), printed at the end of every run: the streams'
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
    terminalreporter.write_sep("=", "when each unit ran (ENGINE_STREAMS in tests/engine_streams.py)")
    for line in format_unit_times(times):
        terminalreporter.write_line(line)
