"""Weekly drift checks: rerun a deployment's arm, compare it item by item with the pinned
golden run, and watch the series of deltas with an EWMA control chart.

`python -m evals drift CONFIG` (`nox -s drift -- CONFIG`): the config's deployment arm
(`drift.arm`, default the candidate) runs again; its items are paired with the same arm
of the deployment's golden run (`python -m evals pin RUN_ID --deployment NAME`) and go
through the ordinary analysis and verdict. A drift run's delta is "this week minus
golden"; the EWMA chart (evals.stats.control_chart, lambda and L from `drift:`, sigma
= each run's paired standard error, one-sided: drops alarm) runs over every drift run of
the deployment, so a slow drift that no single paired test flags still alarms. An alarm
at the newest run makes the verdict REGRESSION (exit 1).

Drift runs never reuse stored arms - measuring the deployment again is the point - but a
rerun of the same command on the same day resumes its unfinished tasks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from evals import stats
from evals.analyse.task_analysis import TaskAnalysis
from evals.errors import UserError
from evals.decide.outcome import DRIFT_KIND as KIND
from evals.schemas import DRIFT_CHART
from evals.decide.verdict import RunVerdict, Verdict


@dataclass(frozen=True)
class DriftInput:
    """What the drift chart gate needs: earlier drift runs and the config's chart."""

    history: dict
    lam: float
    L: float
    deployment: str
    golden_run: str
    arm: str


def drift_run_id(base_id: str, now: datetime | None = None) -> str:
    """One drift run per config and UTC day: a rerun the same day resumes it."""
    day = (now or datetime.now(timezone.utc)).strftime("%Y%m%d")
    return f"{base_id}-drift-{day}"


def golden_arm_dir(golden_source_dir: str, arm: str, deployment: str) -> Path:
    lm_eval = Path(golden_source_dir) / "arms" / arm / "lm_eval"
    if not lm_eval.is_dir():
        raise UserError(f"the golden run of deployment `{deployment}` lives in "
                        f"{golden_source_dir}, but its `{arm}` arm outputs ({lm_eval}) are gone; "
                        "pin another run.")
    return lm_eval


def paired_standard_error(analysis_n: int, flip_rate: float, delta: float) -> float | None:
    """Standard error of a paired mean difference of 0/1 scores, as scipy.stats.sem of the
    differences (ddof=1, like the store's history points): sqrt((p_disc - delta^2)/(n-1))."""
    if analysis_n < 2:
        return None
    variance = max(flip_rate - delta * delta, 0.0)
    return float(np.sqrt(variance / (analysis_n - 1))) or None


def chart_tasks(analyses: list[TaskAnalysis], history: dict[str, list], *, lam: float,
                L: float, run_id: str = "(this run)") -> dict[str, dict]:
    """EWMA chart per gated task over earlier drift runs (`history[task]`: SeriesPoints,
    oldest first) plus this run (`run_id`). Points without a standard error are left out.

    Each chart is a record of everything the gate decided on (lambda, L, target, sigma,
    points, limits, alarms); the run stores it in its summary and the trend page draws
    exactly it, so the page cannot show an alarm the gate did not raise, or miss one."""
    charts = {}
    for a in analyses:
        if not a.gated:
            continue
        points = [(p.run_id, p.delta, p.standard_error) for p in history.get(a.task, [])
                  if p.standard_error]
        se = paired_standard_error(a.n, a.flip_rate, a.delta)
        if se is None:  # no flips at all: this run cannot move the chart
            se = min((p[2] for p in points), default=None)
        if se is None:
            continue
        points.append((run_id, a.delta, se))
        chart = stats.ewma_chart([p[1] for p in points], sigma=[p[2] for p in points],
                                 target=0.0, lam=lam, L=L, alternative="less")
        charts[a.task] = DRIFT_CHART.stamp({
            "method": f"EWMA, lambda={lam:g}, L={L:g}, exact limits, one-sided (drops)",
            "lambda": lam, "L": L, "target": 0.0,
            "sigma_source": "the paired standard error of each drift run's delta",
            "runs": [p[0] for p in points],
            "delta": [float(p[1]) for p in points],
            "sigma": [float(p[2]) for p in points],
            "ewma": [float(x) for x in chart.statistic],
            "lower_limit": [float(x) for x in chart.lower_limit],
            "alarms": list(chart.alarms),
            "alarm_now": (len(points) - 1) in chart.alarms,
        })
    return charts


def apply_chart(verdict: RunVerdict, charts: dict[str, dict]) -> RunVerdict:
    alarmed = sorted(t for t, c in charts.items() if c["alarm_now"])
    if not alarmed:
        return verdict
    detail = "; ".join(
        f"{t}: EWMA {charts[t]['ewma'][-1] * 100:+.2f} pts below its lower control limit "
        f"{charts[t]['lower_limit'][-1] * 100:+.2f} pts over {len(charts[t]['runs'])} drift runs"
        for t in alarmed)
    reason = f"slow drift since the golden run ({detail})"
    if verdict.verdict is Verdict.REGRESSION:
        reason = f"{verdict.reason}; {reason}"
    return replace(verdict, verdict=Verdict.REGRESSION, reason=reason)


def history_points(store, deployment: str, tasks: list[str], exclude: str) -> dict[str, list]:
    """Earlier drift runs' points per task, oldest first (this run's own id excluded)."""
    drift_ids = {e.run_id for e in store.list_runs(None, deployment) if e.kind == KIND}
    drift_ids.discard(exclude)
    return {t: [p for p in store.series(deployment, t) if p.run_id in drift_ids] for t in tasks}


def summary_extras(deployment: str, golden_id: str, arm: str, charts: dict) -> dict:
    return {"drift": {"deployment": deployment, "golden_run": golden_id, "arm": arm,
                      "charts": json.loads(json.dumps(charts))}}

