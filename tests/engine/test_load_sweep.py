"""The load sweep (issue 55) on real `vllm serve` arms of the embedded model: 20 accuracy
items, then a 3-level sweep [1, 2, 4] on the same servers (MTP + prefix caching against
neither); the recorded figures in
summary.json are recomputed here from the raw request timestamps of each arm's
load_sweep.json, the concurrency each level kept is read off those timestamps, and the
report carries the table and the chart; `gate.speed` runs as its own gate step."""

from __future__ import annotations

import json

import numpy as np
import pytest
from engine_helpers import ENGINE, read_summary, run_cli, save_artifact, write_config

LEVELS = [1, 2, 4]
MTP_PREFIX = {**ENGINE, "enable_prefix_caching": True,
              "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}
N = 6
TOKENS = 12


def _most_in_flight(requests: list[dict]) -> int:
    events = sorted([(r["start"], 1) for r in requests] + [(r["end"], -1) for r in requests],
                    key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("load-sweep")
    config = write_config(
        tmp, "load-sweep",
        {"mode": "server", "concurrency": 4,
         "engine": {**ENGINE, "enable_prefix_caching": False}},
        {"mode": "server", "concurrency": 4, "engine": MTP_PREFIX},
        tasks=[{"name": "tiny_addition", "metric": "exact_match"}], limit=20,
        speed={"concurrency": LEVELS, "requests_per_level": N, "prompts": "tiny_addition",
               "output_tokens": TOKENS, "slo": {"ttft_p95_ms": 60_000}},
        gate={"alpha": 0.05, "margin": 0.05, "speed": {"min_slo_concurrency": 4}})
    result = run_cli("ab", str(config), "--reports", str(tmp / "reports"),
                     "--store", str(tmp / "store"))
    assert result.returncode in (0, 1, 3), result.stdout + result.stderr
    run_dir = next((tmp / "reports").glob("*/summary.json")).parent
    return run_dir, read_summary(tmp / "reports")


def test_the_recorded_figures_match_the_request_timestamps(swept):
    run_dir, summary = swept
    curve = summary["load_curve"]
    save_artifact("load_sweep_curve", curve)
    assert curve["levels"] == LEVELS and curve["output_tokens"] == TOKENS
    raw = {arm: json.loads((run_dir / "arms" / arm / "load_sweep.json").read_text())
           for arm in ("baseline", "candidate")}
    for arm, sweep in raw.items():
        assert sweep["schema_version"] == 1 and sweep["prompts"] == "task tiny_addition"
        assert sweep["warm_state"]["accuracy_requests"] >= 20  # after the accuracy items
        recorded = curve["arms"][arm]
        assert recorded["sweep_seconds"] == pytest.approx(sweep["wall_seconds"])
        for level, figures in zip(sweep["results"], recorded["levels"]):
            c = level["concurrency"]
            assert level["status"] == figures["status"] == "ok", level["error"]
            requests = level["requests"]
            assert len(requests) == N and figures["requests"] == N
            # the level ran at its concurrency: never more in flight, and c at some point
            assert _most_in_flight(requests) == c
            start = np.array([r["start"] for r in requests])
            first = np.array([r["first"] for r in requests])
            end = np.array([r["end"] for r in requests])
            tokens = np.array([r["output_tokens"] for r in requests])
            assert (tokens == TOKENS).all()  # EOS ignored: every request ran to its length
            wall = end.max() - start.min()
            assert figures["wall_seconds"] == pytest.approx(wall)
            assert figures["output_tokens_per_s"] == pytest.approx(tokens.sum() / wall)
            assert figures["requests_per_s"] == pytest.approx(N / wall)
            ttft = first - start
            tpot = (end - first) / (tokens - 1)
            for name, values in (("ttft", ttft), ("tpot", tpot), ("e2e", end - start)):
                for q in (50, 95, 99):
                    assert figures[name][f"p{q}"] == pytest.approx(np.percentile(values, q))
                    assert figures[name][f"p{q}_low"] <= figures[name][f"p{q}"] \
                        <= figures[name][f"p{q}_high"]
            gaps = np.concatenate([np.diff(r["chunks"]) for r in requests])
            assert figures["itl"]["n"] == gaps.size
            assert figures["itl"]["p50"] == pytest.approx(np.percentile(gaps, 50))
            # the server's own queue, read while the level ran
            if figures["running_max"] is not None:
                assert figures["running_max"] <= c


def test_speedups_crossover_and_slo_follow_from_the_timestamps(swept):
    run_dir, summary = swept
    curve = summary["load_curve"]
    raw = {arm: json.loads((run_dir / "arms" / arm / "load_sweep.json").read_text())
           for arm in ("baseline", "candidate")}
    rates = []
    for i, c in enumerate(LEVELS):
        rate = {}
        for arm in raw:
            requests = raw[arm]["results"][i]["requests"]
            rate[arm] = sum(r["output_tokens"] for r in requests) / \
                sum(r["end"] - r["start"] for r in requests)
        speedup = curve["speedups"][i]
        assert speedup["concurrency"] == c
        assert speedup["speedup"] == pytest.approx(rate["candidate"] / rate["baseline"])
        assert speedup["low"] <= speedup["speedup"] <= speedup["high"]
        rates.append(rate["candidate"] / rate["baseline"])
    s = np.array(rates)
    crossing = [i for i in range(len(s) - 1) if s[i] > 1 and s[i + 1] < 1]
    if crossing:
        i = crossing[0]
        at = LEVELS[i] + (1 - s[i]) * (LEVELS[i + 1] - LEVELS[i]) / (s[i + 1] - s[i])
        assert curve["crossover"]["kind"] == "crossed"
        assert curve["crossover"]["concurrency"] == pytest.approx(at)
    else:
        assert curve["crossover"]["kind"] in ("faster_throughout", "slower_throughout",
                                              "not_faster_at_start")
    for arm in raw:  # a generous SLO (60 s): every level meets it
        assert curve["arms"][arm]["slo_safe_concurrency"] == LEVELS[-1]


def test_the_report_has_the_load_curve(swept):
    run_dir, _ = swept
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert '<svg class="load-curve"' in html and html.count('class="curve"') == 4
    md = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "Load curve:" in md and "Crossover:" in md and "Cost: sweep wall time:" in md


def test_the_speed_gate_is_a_step_of_its_own(swept):
    _, summary = swept
    steps = [step["gate"] for step in summary["gates"]]
    assert "load curve" in steps
    (check,) = summary["load_curve"]["gate"]
    assert check["outcome"] == "met"  # a 60 s SLO holds up to the top level, 4
    assert check["measured"] == "highest SLO-safe concurrency 4"


def test_a_rerun_from_the_store_reuses_the_recorded_sweeps_and_says_so(swept):
    """The same config again, into other reports: both arms' items come from the run store
    and so do their sweeps (`speed.on_reuse: recorded`); no server starts."""
    run_dir, first = swept
    tmp = run_dir.parent.parent
    reports = tmp / "reports-again"
    result = run_cli("ab", str(tmp / "load-sweep.yaml"), "--reports", str(reports),
                     "--store", str(tmp / "store"))
    assert result.returncode == first["exit_code"], result.stdout + result.stderr
    assert result.stdout.count("load sweep reused from") == 2, result.stdout
    assert "starting server model" not in result.stdout + result.stderr
    again = read_summary(reports)["load_curve"]
    for arm in ("baseline", "candidate"):
        assert again["arms"][arm]["origin"] == "reused"
        assert again["arms"][arm]["reused_run"] == run_dir.name
        assert first["load_curve"]["arms"][arm]["origin"] == "ran"
        assert again["arms"][arm]["levels"] == first["load_curve"]["arms"][arm]["levels"]
    md = (next(reports.glob("*/summary.md"))).read_text(encoding="utf-8")
    assert f"baseline 0 s here: reused from run {run_dir.name}" in md
