"""Puts tests/ on the import path, for helpers shared by several test folders
(`synthetic_runs`), and marks the tiers: `engine` (tests/engine: real vLLM engines) and
`browser` (tests that drive headless Chromium). The quick tier is `-m "not engine"`.

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
