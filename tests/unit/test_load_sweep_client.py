"""The load sweep's client (evals.runner.load_sweep) against a fake streaming server on
loopback: per request its timestamps and tokens, the concurrency it keeps, the server's
gauges, and a level whose requests fail recorded with the server's error while the sweep
goes on."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from aiohttp import web

from evals.runner.load_sweep import Sweep, server_gauges, synthetic_prompts, task_prompts
from evals.runner.server import LOOPBACK, free_port

METRICS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="m"}} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{model_name="m"}} 0.25
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{{model_name="m"}} {served}
"""


class FakeServer:
    """Streams `max_tokens` one-token chunks, 5 ms apart; fails while `failing` is set."""

    def __init__(self):
        self.port = free_port()
        self.in_flight = 0
        self.most = 0
        self.served = 0
        self.failing = False
        self.bodies: list[dict] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()

    async def completions(self, request):
        body = await request.json()
        self.bodies.append(body)
        if self.failing:
            return web.json_response({"error": {"message": "KV cache <full> | boom"}},
                                     status=500)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(body["max_tokens"]):
            await asyncio.sleep(0.005)
            chunk = {"choices": [{"index": 0, "text": "x", "finish_reason": None}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"choices": [], "usage": {"prompt_tokens": 3,
                                          "completion_tokens": body["max_tokens"]}}
        await response.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        self.in_flight -= 1
        self.served += 1
        return response

    async def metrics(self, request):
        return web.Response(text=METRICS.format(running=self.in_flight, served=self.served))

    def __enter__(self):
        def serve():
            asyncio.set_event_loop(self._loop)
            app = web.Application()
            app.router.add_post("/v1/completions", self.completions)
            app.router.add_get("/metrics", self.metrics)
            self._runner = web.AppRunner(app)
            self._loop.run_until_complete(self._runner.setup())
            self._loop.run_until_complete(web.TCPSite(self._runner, LOOPBACK, self.port).start())
            self._ready.set()
            self._loop.run_forever()

        threading.Thread(target=serve, daemon=True).start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)


def _counters(text):
    from evals.runner.backends import server_counters

    return server_counters(text) if text else {}


def test_each_request_is_timed_and_the_concurrency_is_kept():
    with FakeServer() as server:
        sweep = Sweep(f"http://{LOOPBACK}:{server.port}", "evals-arm", ["a", "b", "c"],
                      output_tokens=6, requests_per_level=8, request_timeout_s=30,
                      level_timeout_s=60)
        levels = sweep.run([1, 4], _counters, say=lambda m: None)
    assert [lv["concurrency"] for lv in levels] == [1, 4]
    assert all(lv["status"] == "ok" and lv["error"] is None for lv in levels)
    for level in levels:
        assert len(level["requests"]) == 8
        for r in level["requests"]:
            assert r["start"] <= r["first"] <= r["end"] and r["output_tokens"] == 6
            assert len(r["chunks"]) == 6 and r["chunks"][0] == r["first"]
            assert r["chunks"] == sorted(r["chunks"])
    one, four = levels
    # concurrency 1: each request starts after the previous one ended
    starts = [r["start"] for r in one["requests"]]
    ends = [r["end"] for r in one["requests"]]
    assert all(s >= e for s, e in zip(starts[1:], ends[:-1]))
    assert server.most == 4
    assert one["counters"]["vllm:num_preemptions"] == 8  # the fake counts requests served
    assert any(g.get("kv_cache_usage") == 0.25 for g in four["gauges"])
    body = server.bodies[0]
    assert body["stream"] and body["ignore_eos"] and body["max_tokens"] == 6
    assert body["model"] == "evals-arm"


def test_a_failing_level_is_recorded_and_the_sweep_goes_on():
    with FakeServer() as server:
        sweep = Sweep(f"http://{LOOPBACK}:{server.port}", "m", ["p"], output_tokens=3,
                      requests_per_level=4, request_timeout_s=30, level_timeout_s=60)
        said = []
        original = sweep._level

        async def level(session, concurrency, counters):
            server.failing = concurrency == 2  # level 2 fails from its warm-up on
            return await original(session, concurrency, counters)

        sweep._level = level
        levels = sweep.run([1, 2, 3], _counters, say=said.append)
    assert [lv["status"] for lv in levels] == ["ok", "failed", "ok"]
    assert levels[1]["error"].startswith("HTTP 500: ") and "KV cache <full> | boom" in \
        levels[1]["error"]
    assert all(r["error"] for r in levels[1]["requests"])
    assert levels[2]["requests"] and not any(r["error"] for r in levels[2]["requests"])
    assert any("concurrency 2: failed" in m for m in said)


def test_a_level_out_of_time_fails_its_unfinished_requests():
    with FakeServer() as server:
        sweep = Sweep(f"http://{LOOPBACK}:{server.port}", "m", ["p"], output_tokens=50,
                      requests_per_level=6, request_timeout_s=30, level_timeout_s=0.5)
        levels = sweep.run([1], _counters, say=lambda m: None)
    assert levels[0]["status"] == "failed"
    assert "level_timeout_s" in levels[0]["error"]


def test_only_loopback_servers_are_swept():
    with pytest.raises(ValueError, match="loopback"):
        Sweep("http://10.0.0.1:8000", "m", ["p"], output_tokens=1, requests_per_level=1,
              request_timeout_s=1, level_timeout_s=1)


def test_prompts_from_samples_and_synthetic(tmp_path):
    path = tmp_path / "samples_t.jsonl"
    rows = [{"doc_id": 1, "arguments": {"gen_args_0": {"arg_0": "second", "arg_1": {}}}},
            {"doc_id": 0, "arguments": {"gen_args_0": {"arg_0": "first", "arg_1": {}}}}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    assert task_prompts(path) == ["first", "second"]
    a = synthetic_prompts(3, 5, [7, 8, 9], seed=1)
    assert a == synthetic_prompts(3, 5, [7, 8, 9], seed=1)
    assert len(a) == 3 and all(len(p) == 5 and set(p) <= {7, 8, 9} for p in a)


def test_gauges_are_read_from_the_metrics_page():
    assert server_gauges(METRICS.format(running=3, served=1)) == {
        "running": 3.0, "waiting": 0.0, "kv_cache_usage": 0.25}
