"""A test double of the router: an OpenAI-style SSE completions server with deterministic tokens.

It is not the emulator. Token i of an answer is a pure function of the prompt
and i, written as the emulator's pseudo-words (with token_ids unless a test
turns them off); the time to first token grows with the prompt's uncached tokens, so tests
can predict the order of TTFTs; it keeps an unbounded prefix cache of prompts
and answers, as the real decode side does, and reports its hits in `pdd`; a
test can make chosen requests fail in each way the contract allows.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from aiohttp import web

from loadgen.tokens import common_prefix_length
from services.engine.tokens import WordTokenizer

VOCAB = 32000
MODEL = "fake-model"
WORDS = WordTokenizer(VOCAB)  # the emulator's own token spelling, as the real router streams it


def answer_ids(prompt: list[int], count: int) -> list[int]:
    digest = hashlib.blake2b(np.asarray(prompt, dtype=np.int64).tobytes(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "little")).integers(0, VOCAB, count).tolist()


@dataclass
class Served:
    request_id: str | None
    prompt: list[int]
    max_tokens: int
    arrived: float
    hit_tokens: int = 0
    output_ids: list[int] = field(default_factory=list)
    finished: float | None = None


@dataclass
class FakeRouter:
    url: str = ""
    mode: str = "pdd"
    ttft_base_s: float = 0.002
    ttft_per_miss_token_s: float = 0.0
    itl_s: float = 0.001
    send_token_ids: bool = True
    last_chunk_has_token: bool = False
    kv_bytes_per_token: int = 1000
    fail: Callable[[Served], str | None] | None = None  # "http", "sse", "truncate" or "stall"
    served: list[Served] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    _cache: list[np.ndarray] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        return app

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompt, max_tokens = body["prompt"], body["max_tokens"]
        if not all(isinstance(t, int) and 0 <= t < VOCAB for t in prompt) or body.get("stream") is not True:
            return _error(400, "prompt must be token ids and stream true")
        if body.get("model") != MODEL:
            return _error(404, f"model {body.get('model')!r} does not exist")
        served = Served(request.headers.get("x-request-id"), prompt, max_tokens, time.perf_counter())
        ids = np.asarray(prompt, dtype=np.int64)
        served.hit_tokens = max((common_prefix_length(ids, seen) for seen in self._cache), default=0)
        self.served.append(served)
        failure = self.fail(served) if self.fail else None
        if failure == "http":
            return _error(503, "no capacity")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._stream(request, served, failure)
        finally:
            self.in_flight -= 1

    async def _stream(self, request: web.Request, served: Served, failure: str | None) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        if served.request_id:
            response.headers["x-request-id"] = served.request_id
        await response.prepare(request)
        timeline = {"arrival": time.time(), "prefill_start": time.time()}
        miss = len(served.prompt) - served.hit_tokens
        await asyncio.sleep(self.ttft_base_s + self.ttft_per_miss_token_s * miss)
        if failure == "stall":
            await asyncio.sleep(3600)
        timeline["prefill_end"] = timeline["kv_transfer_start"] = time.time()
        tokens = answer_ids(served.prompt, served.max_tokens)
        streamed = tokens if self.last_chunk_has_token else tokens[:-1]
        relayed = served.hit_tokens < 0.95 * len(served.prompt) and served.max_tokens > 4
        for i, token in enumerate(streamed):
            if i == 2 and failure in ("sse", "truncate"):
                if failure == "sse":
                    error = {"message": "decode instance died", "type": "server_error", "code": 500}
                    await _send(response, {"error": error})
                return response
            if i == 4 and relayed:  # the fake relay hands off after four tokens
                timeline["kv_transfer_end"] = timeline["handoff_start"] = time.time()
                timeline["handoff_end"] = timeline["md_decode_start"] = time.time()
            await _send(response, self._chunk(served, token, None))
            await asyncio.sleep(self.itl_s)
        timeline.setdefault("kv_transfer_end", timeline["prefill_end"])
        timeline["finish"] = time.time()
        served.output_ids = tokens
        self._cache.append(np.asarray(served.prompt + tokens, dtype=np.int64))
        last = None if self.last_chunk_has_token else tokens[-1]
        final = self._chunk(served, last, "length")
        final["usage"] = {"prompt_tokens": len(served.prompt), "completion_tokens": len(tokens),
                          "total_tokens": len(served.prompt) + len(tokens)}
        final["pdd"] = self._stats(served, miss, timeline)
        await _send(response, final)
        await response.write(b"data: [DONE]\n\n")
        served.finished = time.perf_counter()
        return response

    def _chunk(self, served: Served, token: int | None, finish: str | None) -> dict:
        choice: dict = {"index": 0, "text": "" if token is None else WORDS.token_text(token), "finish_reason": finish}
        if self.send_token_ids:
            choice["token_ids"] = [] if token is None else [token]
        return {"id": served.request_id, "object": "text_completion", "choices": [choice]}

    def _stats(self, served: Served, miss: int, timeline: dict) -> dict:
        relayed = served.hit_tokens < 0.95 * len(served.prompt) and served.max_tokens > 4
        rld = min(4, served.max_tokens) if relayed else 0
        return {
            "mode": self.mode, "pipeline": "P-RLD-MD" if relayed else "P-MD",
            "prefill_hit_tokens": served.hit_tokens, "decode_hit_tokens": served.hit_tokens,
            "wan_bytes": miss * self.kv_bytes_per_token, "kv_transfer_s": 0.001, "rld_tokens": rld,
            "md_tokens": served.max_tokens - rld,
            "handoff": {"mode": "one-shot", "chunks": 1, "stall_s": 0.001} if relayed else None,
            "singular": False, "fallback": False, "timeline": timeline,
        }


async def _send(response: web.StreamResponse, payload: dict) -> None:
    await response.write(f"data: {json.dumps(payload)}\n\n".encode())


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": status}}
    return web.json_response(body, status=status)


@pytest.fixture
async def fake_router():
    router = FakeRouter()
    runner = web.AppRunner(router.app(), handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    router.url = f"http://{host}:{port}"
    yield router
    await runner.cleanup()
