"""Puts tests/ on the import path, for helpers shared by several test folders
(`synthetic_runs`), and marks the tiers: `engine` (tests/engine: real vLLM engines) and
`browser` (tests that drive headless Chromium). The quick tier is `-m "not engine"`.
Under pytest-xdist (`nox -s tests` runs `-n 2 --dist loadscope`) the engine tests form one
work unit, run by one worker while the other runs the rest (`EngineTestsTogether`).

The tests run with the CI systems' variables removed (the suite writes a job summary,
annotations and a dotenv when it sees them, evals.report.ci_outputs); a test that checks
those outputs sets them itself."""

import pytest

CI_VARIABLES = ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITLAB_CI",
                "EVALS_DOTENV")


@pytest.fixture(scope="session", autouse=True)
def outside_ci():
    patch = pytest.MonkeyPatch()
    for name in CI_VARIABLES:
        patch.delenv(name, raising=False)
    yield
    patch.undo()


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/engine" in str(item.fspath):
            item.add_marker(pytest.mark.engine)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


ENGINE_TESTS = "tests/engine/"

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist is optional: without it the tests run in one process
    pass
else:
    class EngineTestsTogether(LoadScopeScheduling):
        """Every engine test in one work unit, so one worker runs them in order (one engine
        at a time, session fixtures shared) while the other workers run the rest, one test
        per unit. pytest-xdist's own `xdist_group` mark does not group under pytest 9 (it
        renames node ids, which pytest 9 no longer reads back)."""

        def _split_scope(self, nodeid: str) -> str:
            return ENGINE_TESTS if nodeid.startswith(ENGINE_TESTS) else nodeid

    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "loadscope":
            return EngineTestsTogether(config, log)
        return None
