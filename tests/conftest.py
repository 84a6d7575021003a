"""Puts tests/ on the import path, for helpers shared by several test folders
(`synthetic_runs`), and marks the tiers: `engine` (tests/engine: real vLLM engines) and
`browser` (tests that drive headless Chromium). The quick tier is `-m "not engine"`.

With pytest-xdist (`nox -s tests` runs `-n 2 --dist loadgroup`) every engine test is in one
group, so one worker runs them one after another - never two engines at once - while the
other worker runs the quick tier beside it."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/engine" in str(item.fspath):
            item.add_marker(pytest.mark.engine)
            item.add_marker(pytest.mark.xdist_group("engine"))
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
