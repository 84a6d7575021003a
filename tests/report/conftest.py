"""Fixtures for the report tests: run directories made by the real pipeline, a browser."""

from __future__ import annotations

from pathlib import Path

import fake_runs
import pytest
from headless_chromium import CHROMIUM, Browser

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def regression_run(tmp_path_factory) -> Path:
    """A/B run: gsm8k_tiny regresses (holds the script-injection item), boolq_tiny is
    inconclusive with label analysis, and a non-gated continuous task has an odd name."""
    return fake_runs.regression_run(tmp_path_factory.mktemp("runs") / "regression-run")


@pytest.fixture(scope="session")
def compare_run(tmp_path_factory) -> Path:
    return fake_runs.passing_compare_run(tmp_path_factory.mktemp("runs") / "compare-run")


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"browser tests need headless Chromium at {CHROMIUM} "
                    "(apt-get install -y chromium)")
    with Browser() as instance:
        yield instance


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
