"""Speed beside accuracy: per-arm latency quantiles, the TPOT speedup and its gate."""

from __future__ import annotations

import numpy as np
import pytest

from evals.runner.backends import server_counters
from evals.runner.server import LOOPBACK, serve_arguments
from evals.analyse.speed import arm_speed, compare_speed


def _task(rng, n, tpot, ttft=0.05, tokens=6, wall=10.0):
    requests = []
    for _ in range(n):
        t = float(rng.gamma(20, tpot / 20))
        first = float(rng.gamma(20, ttft / 20))
        requests.append({"ttft": first, "e2e": first + t * (tokens - 1), "output_tokens": tokens})
    return {"requests": requests, "wall_seconds": wall}


def test_arm_speed_matches_numpy_on_the_same_requests():
    rng = np.random.default_rng(0)
    task = _task(rng, 200, 0.004)
    task["requests"].append({"ttft": 0.01, "e2e": 0.01, "output_tokens": 1})  # no TPOT
    speed = arm_speed("baseline", [task], {"vllm:spec_decode_num_draft_tokens": 100.0,
                                           "vllm:spec_decode_num_accepted_tokens": 89.0})
    ttft = np.array([r["ttft"] for r in task["requests"]])
    tpot = np.array([(r["e2e"] - r["ttft"]) / 5 for r in task["requests"][:200]])
    assert speed.requests == 201 and speed.output_tokens == 1201
    assert speed.ttft_p50 == pytest.approx(np.median(ttft), rel=1e-12)
    assert speed.tpot_p95 == pytest.approx(np.percentile(tpot, 95), rel=1e-12)
    assert speed.output_tokens_per_s == pytest.approx(120.1)
    assert speed.acceptance_rate == pytest.approx(0.89)


def test_speedup_is_the_ratio_of_mean_tpot_with_an_interval_around_it():
    rng = np.random.default_rng(1)
    base = {"t": _task(rng, 300, 0.006)}
    cand = {"t": _task(rng, 300, 0.004, wall=7.0)}
    result = compare_speed(base, cand, spec_decode={}, rng=np.random.default_rng(2),
                           confidence=0.9, n_resamples=2000)
    tb = np.array([(r["e2e"] - r["ttft"]) / 5 for r in base["t"]["requests"]])
    tc = np.array([(r["e2e"] - r["ttft"]) / 5 for r in cand["t"]["requests"]])
    assert result.tpot_speedup == pytest.approx(tb.mean() / tc.mean(), rel=1e-12)
    assert result.ci_low < result.tpot_speedup < result.ci_high
    assert 1.3 < result.ci_low and result.ci_high < 1.7  # true ratio 1.5
    assert result.throughput_ratio == pytest.approx(10.0 / 7.0)
    assert result.gate is None


@pytest.mark.parametrize(("minimum", "gate"), [(1.2, "met"), (2.0, "missed"), (1.5, "undecided")])
def test_min_speedup_gate(minimum, gate):
    """With a rerun as fast as the baseline (A/A factor 1) the gate decides on the
    speedup's own interval."""
    rng = np.random.default_rng(3)
    base, cand = {"t": _task(rng, 300, 0.006)}, {"t": _task(rng, 300, 0.004)}
    result = compare_speed(base, cand, spec_decode={}, rng=np.random.default_rng(4),
                           min_speedup=minimum, rerun=base)
    assert result.rerun_speedup == pytest.approx(1.0)
    assert (result.gate_low, result.gate_high) == (result.ci_low, result.ci_high)
    assert result.gate == gate


def test_the_gate_widens_the_interval_by_the_reruns_own_difference():
    """Two engine starts of one GPU config differed up to 1.41x in speed while each run's
    interval was a few percent wide (benchmarks/results, GPU A/As): a true 1.5x speedup
    next to an A/A that differs 1.3x cannot show 1.2x; without a rerun nothing is shown."""
    rng = np.random.default_rng(3)
    base, cand = {"t": _task(rng, 300, 0.006)}, {"t": _task(rng, 300, 0.004)}
    rerun = {"t": _task(rng, 300, 0.006 * 1.3)}  # the baseline's second start: 1.3x slower
    result = compare_speed(base, cand, spec_decode={}, rng=np.random.default_rng(4),
                           min_speedup=1.2, rerun=rerun)
    tb = np.array([(r["e2e"] - r["ttft"]) / 5 for r in base["t"]["requests"]])
    tr = np.array([(r["e2e"] - r["ttft"]) / 5 for r in rerun["t"]["requests"]])
    assert result.rerun_speedup == pytest.approx(tb.mean() / tr.mean(), rel=1e-12)
    factor = 1 / result.rerun_speedup
    assert factor > 1.2
    assert result.gate_low == pytest.approx(result.ci_low / factor)
    assert result.gate_high == pytest.approx(result.ci_high * factor)
    assert result.ci_low > 1.2 and result.gate == "undecided"
    alone = compare_speed(base, cand, spec_decode={}, rng=np.random.default_rng(4),
                          min_speedup=1.2)
    assert alone.ci_low > 1.2 and alone.rerun_speedup is None and alone.gate == "undecided"


def test_only_tasks_timed_in_both_arms_count_and_none_without_any():
    rng = np.random.default_rng(5)
    assert compare_speed({"a": _task(rng, 10, 0.01)}, {"b": _task(rng, 10, 0.01)},
                         spec_decode={}, rng=rng) is None
    single = compare_speed({"a": _task(rng, 1, 0.01)}, {"a": _task(rng, 1, 0.01)},
                           spec_decode={}, rng=rng)
    assert single.tpot_speedup is None and "fewer than two" in single.note


def test_server_exercise_counters_from_prometheus_text():
    text = """# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="evals-arm"} 250.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="evals-arm"} 200.0
# HELP vllm:num_requests_running Number of requests.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="evals-arm"} 0.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="evals-arm"} 640.0
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="evals-arm"} 1000.0
"""
    assert server_counters(text) == {"vllm:spec_decode_num_draft_tokens": 250.0,
                                     "vllm:spec_decode_num_accepted_tokens": 200.0,
                                     "vllm:prefix_cache_hits": 640.0,
                                     "vllm:prefix_cache_queries": 1000.0}


def test_serve_arguments_spell_engine_args_as_vllm_flags_on_loopback():
    args = serve_arguments("/m", {"dtype": "bfloat16", "enable_prefix_caching": False,
                                  "enforce_eager": True, "max_model_len": 1024,
                                  "speculative_config": {"method": "mtp"}}, 8123, 7)
    assert args[:5] == ["/m", "--host", LOOPBACK, "--port", "8123"] and LOOPBACK == "127.0.0.1"
    assert "--no-enable-prefix-caching" in args and "--enforce-eager" in args
    assert args[args.index("--speculative-config") + 1] == '{"method": "mtp"}'
    assert args[args.index("--max-model-len") + 1] == "1024"
