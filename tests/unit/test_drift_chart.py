"""A slow drift that no single weekly paired test flags, caught by the EWMA chart over runs
stored in a real run store; a flat series does not alarm."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import sem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synthetic_runs import PlantedTask, paired_task, write_synthetic_run  # noqa: E402

from evals import stats  # noqa: E402
from evals.analyse.task_analysis import analyse_task  # noqa: E402
from evals.decide.drift import apply_chart, chart_tasks, history_points, paired_standard_error  # noqa: E402
from evals.store import RunStore  # noqa: E402
from evals.decide.verdict import Verdict, decide  # noqa: E402


@pytest.fixture(autouse=True)
def no_records(monkeypatch):
    monkeypatch.setattr("evals.analyse.task_analysis._labels", lambda p: None)
    monkeypatch.setattr("evals.analyse.task_analysis._lengths", lambda p: None)


def _weeks(tmp_path: Path, store: RunStore, lost: int, gained: int, weeks: int = 10) -> None:
    start = datetime(2026, 9, 1, tzinfo=timezone.utc)
    rng = np.random.default_rng(7)
    for week in range(weeks):
        run_id = f"deploy-drift-{week:02d}"
        planted = PlantedTask("t", 2000, lost, gained, verdict="INCONCLUSIVE")
        run_dir = write_synthetic_run(
            tmp_path / run_id, run_id=run_id, rng=rng, tasks=[planted],
            created=(start + timedelta(weeks=week)).isoformat(timespec="seconds"))
        store.record_run(run_dir, kind="drift", deployment="deploy")
    # an ab run of the same deployment is not part of the drift series
    other = write_synthetic_run(tmp_path / "deploy-ab", run_id="deploy-ab", rng=rng,
                                created=start.isoformat(timespec="seconds"),
                                tasks=[PlantedTask("t", 2000, 300, 10, verdict="REGRESSION")])
    store.record_run(other, kind="ab", deployment="deploy")


def _this_week(lost: int, gained: int):
    paired = paired_task(PlantedTask("t", 2000, lost, gained), np.random.default_rng(11),
                         text=False)
    return analyse_task(paired, gated=True, alpha=0.05, margin=0.03, seed=1, n_resamples=200)


def test_slow_drift_no_single_test_flags_is_caught_by_the_chart(tmp_path):
    store = RunStore(tmp_path / "store")
    _weeks(tmp_path, store, lost=110, gained=90)  # -1.0 pt a week, 10% of items flip
    single = stats.mcnemar_exact_from_counts(
        stats.flip_counts(*_counts_arrays(110, 90)), alternative="less")
    assert single.pvalue > 0.05  # no week on its own is a regression
    history = history_points(store, "deploy", ["t"], exclude="this-week")
    assert [p.run_id for p in history["t"]] == [f"deploy-drift-{w:02d}" for w in range(10)]
    analysis = _this_week(110, 90)
    verdict = decide([analysis], alpha=0.05, margin=0.03)
    assert verdict.verdict is not Verdict.REGRESSION
    charts = chart_tasks([analysis], history, lam=0.2, L=2.7)
    chart = charts["t"]
    assert chart["alarm_now"] and len(chart["runs"]) == 11
    # reference: the EWMA recursion and exact limits written out by hand
    z, expected = 0.0, []
    for x in chart["delta"]:
        z = 0.2 * x + 0.8 * z
        expected.append(z)
    assert chart["ewma"] == pytest.approx(expected, rel=1e-12)
    sigma = chart["sigma"][0]
    limit = -2.7 * sigma * np.sqrt(0.2 / 1.8 * (1 - 0.8 ** 2))
    assert chart["lower_limit"][0] == pytest.approx(limit, rel=1e-9)
    final = apply_chart(verdict, charts)
    assert final.verdict is Verdict.REGRESSION and "slow drift" in final.reason


def test_a_flat_series_does_not_alarm(tmp_path):
    store = RunStore(tmp_path / "store")
    _weeks(tmp_path, store, lost=100, gained=100)
    analysis = _this_week(100, 100)
    charts = chart_tasks([analysis], history_points(store, "deploy", ["t"], exclude="x"),
                         lam=0.2, L=2.7)
    assert not charts["t"]["alarm_now"] and charts["t"]["alarms"] == []
    verdict = decide([analysis], alpha=0.05, margin=0.03)
    assert apply_chart(verdict, charts) is verdict


def test_paired_standard_error_matches_the_sample_formula():
    b, c = _counts_arrays(110, 90)
    diff = c - b
    expected = sem(diff)
    assert paired_standard_error(diff.size, float(np.mean(diff != 0)), float(diff.mean())) == \
        pytest.approx(expected, rel=1e-12)


def _counts_arrays(lost: int, gained: int, n: int = 2000):
    b = np.zeros(n)
    b[:1400] = 1
    c = b.copy()
    c[:lost] = 0
    c[1400:1400 + gained] = 1
    return b, c
