"""End-to-end tests on real vLLM engines (CPU) with the shipped tiny model and real lm-eval.

Engines start one at a time (the runner guarantees it); each test keeps its item
slices small so the whole engine suite fits in CI's budget.
"""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/engine" in str(item.fspath):
            item.add_marker(pytest.mark.engine)
