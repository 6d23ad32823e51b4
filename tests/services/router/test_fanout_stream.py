"""Streamed answers with several choices: interleaved chunks with their index, errors, usage once at the end."""

from __future__ import annotations

import asyncio
import json

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from services.launcher.plan import build_plan
from services.router.api import ApiError, CompletionRequest
from services.router.fanout import plan_jobs
from services.router.fanout_stream import stream_choices
from services.router.pipelines import Finished, Token, base_stats
from services.router.stats import PddStats
from services.router.server import Router
from services.scenario import load_scenario
from services.types import Mode, Pipeline


@pytest.fixture
def router() -> Router:
    return Router(build_plan(load_scenario("colocated-mini")), CollectorRegistry())


async def _answer(router: Router, usage: bool = False, **fields) -> tuple[int, str]:
    body = CompletionRequest.model_validate({"model": "llama3-8b", "max_tokens": 3, "prompt": "x", **fields})

    async def handle(request: web.Request) -> web.StreamResponse:
        pairs = plan_jobs(router, "r", body, chat=False)
        return await stream_choices(request, router, "r", pairs, False, body.n, {}, usage)

    app = web.Application()
    app.router.add_post("/", handle)
    async with TestClient(TestServer(app)) as client:
        reply = await client.post("/")
        return reply.status, await reply.text()


def _stats(**fields) -> PddStats:
    return msgspec.structs.replace(base_stats(Mode.COLOCATED, Pipeline.COLOCATED), **fields)


def _events(text: str) -> list[dict | str]:
    payloads = [line[len("data: "):] for line in text.split("\n\n") if line]
    return [p if p == "[DONE]" else json.loads(p) for p in payloads]


async def test_tokens_go_out_as_each_choice_makes_them_then_usage_once(router):
    turns = {"r#0": asyncio.Event(), "r#1": asyncio.Event()}

    async def run(job):  # choice 1 waits for each token of choice 0: the chunks must alternate
        other = "r#1" if job.request_id == "r#0" else "r#0"
        for position in range(job.max_tokens):
            if job.request_id == "r#1":
                await turns["r#1"].wait()
                turns["r#1"].clear()
            yield Token(position, 7 + position)
            turns[other].set()
            if job.request_id == "r#0" and position < job.max_tokens - 1:
                await turns["r#0"].wait()
                turns["r#0"].clear()
        yield Finished(_stats(prefill_hit_tokens=1))

    router.run = run
    status, text = await _answer(router, usage=True, n=2)
    events = _events(text)
    assert status == 200 and events[-1] == "[DONE]"
    tokens = [e["choices"][0]["index"] for e in events[:-2] if e["choices"][0]["finish_reason"] is None]
    assert tokens == [0, 1, 0, 1, 0, 1]
    finishes = [e["choices"][0] for e in events[:-2] if e["choices"][0]["finish_reason"]]
    assert sorted(f["index"] for f in finishes) == [0, 1] and {f["finish_reason"] for f in finishes} == {"length"}
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 6
    assert events[-2]["usage"]["prompt_tokens"] == 1 and events[-2]["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 1}
    assert router.completed == 1


async def test_without_include_usage_no_chunk_carries_usage(router):
    async def run(job):
        for position in range(job.max_tokens):
            yield Token(position, 3)
        yield Finished(_stats())

    router.run = run
    _, text = await _answer(router, prompt=["a", "b"])
    events = _events(text)
    assert not any("usage" in e for e in events[:-1])
    assert sorted({e["choices"][0]["index"] for e in events[:-1]}) == [0, 1]


async def test_a_choice_failing_mid_stream_ends_it_with_an_error_event_and_stops_the_others(router):
    stopped: list[str] = []

    async def run(job):
        try:
            yield Token(0, 5)
            if job.request_id == "r#1":
                raise ApiError(502, "decode failed", kind="upstream_error")
            await asyncio.Event().wait()  # never set: only cancellation ends this job
        finally:
            stopped.append(job.request_id)

    router.run = run
    status, text = await _answer(router, n=2)
    events = _events(text)
    assert status == 200 and events[-1] == "[DONE]" and events[-2]["error"]["message"] == "decode failed"
    assert sorted(stopped) == ["r#0", "r#1"] and router.failed == 1 and router.completed == 0


async def test_a_failure_before_any_token_is_a_real_status(router):
    async def run(job):
        raise ApiError(503, "prefill failed", kind="upstream_error")
        yield  # an async generator, as the pipelines are

    router.run = run
    status, text = await _answer(router, n=3)
    assert status == 503 and json.loads(text)["error"]["message"] == "prefill failed"
