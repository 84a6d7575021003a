"""Puts tests/ on the import path, for helpers shared by several test folders
(`synthetic_runs`), and marks the tiers: `engine` (tests/engine: real vLLM engines) and
`browser` (tests that drive headless Chromium). The quick tier is `-m "not engine"`."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/engine" in str(item.fspath):
            item.add_marker(pytest.mark.engine)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
