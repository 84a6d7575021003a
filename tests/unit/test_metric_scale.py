"""Metric scale and kind: 0-100 metrics in points, margins in accuracy units, no silent
switch from McNemar to t-tests, and one clear message for values that contradict the
declared scale or kind."""

from __future__ import annotations

import numpy as np
import pytest

from evals.analyse.task_analysis import analyse_task
from evals.errors import UserError
from evals.pair.metric_scale import normalise_metric
from evals.pair.pairing import PairedTask


def _paired(baseline, candidate) -> PairedTask:
    b, c = np.asarray(baseline, float), np.asarray(candidate, float)
    return PairedTask(task="t", metric="m", filter="none", doc_ids=tuple(range(len(b))),
                      baseline=b, candidate=c, baseline_records=(), candidate_records=())


@pytest.fixture(autouse=True)
def no_records(monkeypatch):
    monkeypatch.setattr("evals.analyse.task_analysis._labels", lambda p: None)
    monkeypatch.setattr("evals.analyse.task_analysis._lengths", lambda p: None)


def test_a_0_100_metric_is_reported_in_points_once():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 100, 400)
    cand = np.clip(base - 2.0 + rng.normal(0, 1, 400), 0, 100)
    p = normalise_metric(_paired(base, cand))
    assert not p.is_binary and p.baseline.max() <= 1
    a = analyse_task(p, gated=True, alpha=0.05, margin=0.03, seed=1, n_resamples=1000)
    # the drop is about 2 points on the 0-100 scale: delta about -0.02 in accuracy units
    assert -0.025 < a.delta < -0.015
    declared = normalise_metric(_paired(base, cand), scale=100)
    assert np.array_equal(declared.baseline, p.baseline)


def test_0_1_values_on_a_0_100_scale_stay_binary():
    p = normalise_metric(_paired([100, 0, 100, 100], [0, 0, 100, 100]))
    assert p.is_binary and list(p.baseline) == [1, 0, 1, 1]


@pytest.mark.parametrize("baseline, candidate, kwargs, message", [
    ([1, 0, 1] * 100, [1, 0, 0.5] + [1, 0, 1] * 99, {}, "0/1 except on 1 of 600 values, "
     "first at doc_id 2"),
    ([1, 0, 0.5], [1, 0, 1], {"metric_type": "binary"}, "doc_id 2"),
    ([0, 50, 100], [0, 50, 100], {"scale": 1}, "declared on a 0-1 scale but reaches 100"),
    ([0, 500], [0, 500], {}, "beyond a 0-1 or 0-100 scale"),
    ([0, float("inf")], [0, 1], {}, "not a finite number at doc_id 1"),
])
def test_contradictions_are_one_clear_error(baseline, candidate, kwargs, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        normalise_metric(_paired(baseline, candidate), where="run", **kwargs)


def test_continuous_declared_keeps_fractional_values():
    p = normalise_metric(_paired([1, 0, 0.5] * 10, [1, 0, 1] * 10), metric_type="continuous")
    assert not p.is_binary
    binary_declared_continuous = normalise_metric(_paired([1, 0], [0, 1]),
                                                  metric_type="continuous")
    assert not binary_declared_continuous.is_binary


@pytest.mark.parametrize("stray", [7.0, -1.0])
def test_an_out_of_range_value_in_a_0_1_task_is_named_not_averaged(stray):
    base = [1.0, 0.0] * 100
    cand = [1.0, 0.0] * 99 + [stray, 0.0]
    with pytest.raises(UserError, match=rf"first at doc_id 198 \(baseline 1, candidate "
                                        rf"{stray:g}\)"):
        normalise_metric(_paired(base, cand), where="run")
