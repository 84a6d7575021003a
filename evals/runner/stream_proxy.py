"""A loopback proxy that times each generation request by streaming it.

lm-eval's completions backend sends ordinary (non-streamed) requests. The proxy sits
between lm-eval and the server: a generation request is forwarded with `stream: true`,
the streamed chunks are timed (time to first token, time per output token) and put back
together into the ordinary response lm-eval expects. Scoring requests (`echo`/`logprobs`,
for loglikelihood tasks) and anything else pass through unchanged. So speed is measured
on exactly the requests the accuracy comes from.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from evals.runner.server import LOOPBACK, free_port


@dataclass(frozen=True, slots=True)
class RequestTiming:
    ttft: float
    e2e: float
    output_tokens: int

    @property
    def tpot(self) -> float | None:
        if self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)


def _prompt_count(prompt) -> int:
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (list, str)):
        return len(prompt)
    return 1


def _is_generation(body: dict) -> bool:
    return not (body.get("echo") or body.get("logprobs") or body.get("stream"))


class StreamingProxy:
    """Context manager: `proxy.base_url` forwards to `upstream`; `proxy.timings` fills up."""

    def __init__(self, upstream: str, headers: dict[str, str] | None = None,
                 extra_body: dict | None = None):
        self.upstream = upstream.rstrip("/")
        self.headers = headers or {}
        self.extra_body = extra_body or {}  # added to generation requests (structured output)
        self.port = free_port()
        self.base_url = f"http://{LOOPBACK}:{self.port}"
        self.timings: list[RequestTiming] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="evals-proxy")
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def __enter__(self) -> StreamingProxy:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc) -> None:
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    def take_timings(self) -> list[RequestTiming]:
        taken, self.timings = self.timings, []
        return taken

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start())
        except BaseException as exc:  # reported to __enter__
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_read=900),
            connector=aiohttp.TCPConnector(limit=0))
        app = web.Application(client_max_size=1024 ** 3)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, LOOPBACK, self.port).start()

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        url = self.upstream + request.path_qs
        raw = await request.read()
        headers = {**self.headers, "Content-Type": request.headers.get("Content-Type",
                                                                       "application/json")}
        if request.method == "POST" and request.path.endswith("/completions"):
            body = json.loads(raw or b"{}")
            if _is_generation(body):
                return await self._streamed(url, body, headers)
        async with self._session.request(request.method, url, data=raw,
                                         headers=headers) as upstream:
            payload = await upstream.read()
            return web.Response(body=payload, status=upstream.status,
                                content_type=upstream.content_type)

    async def _streamed(self, url: str, body: dict, headers: dict) -> web.Response:
        assert self._session is not None
        streamed = {**body, **self.extra_body, "stream": True,
                    "stream_options": {"include_usage": True}}
        started = time.perf_counter()
        first: float | None = None
        texts: dict[int, list[str]] = {i: [] for i in range(_prompt_count(body.get("prompt")))}
        finish: dict[int, str | None] = {}
        usage: dict | None = None
        meta: dict = {}
        async with self._session.post(url, json=streamed, headers=headers) as upstream:
            if upstream.status != 200:
                payload = await upstream.read()
                return web.Response(body=payload, status=upstream.status,
                                    content_type=upstream.content_type)
            async for line in upstream.content:
                text = line.decode("utf-8").strip()
                if not text.startswith("data:"):
                    continue
                data = text[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                meta = meta or {k: chunk.get(k) for k in ("id", "created", "model")}
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    index = int(choice.get("index", 0))
                    piece = choice.get("text") or ""
                    if piece and first is None:
                        first = time.perf_counter()
                    texts.setdefault(index, []).append(piece)
                    if choice.get("finish_reason") is not None:
                        finish[index] = choice["finish_reason"]
        ended = time.perf_counter()
        tokens = int((usage or {}).get("completion_tokens") or 0)
        ttft = (first if first is not None else ended) - started
        self.timings.append(RequestTiming(ttft=ttft, e2e=ended - started, output_tokens=tokens))
        response = {
            "id": meta.get("id"), "object": "text_completion", "created": meta.get("created"),
            "model": meta.get("model") or body.get("model"),
            "choices": [{"index": i, "text": "".join(texts[i]), "logprobs": None,
                         "finish_reason": finish.get(i)} for i in sorted(texts)],
            "usage": usage,
        }
        return web.json_response(response)
