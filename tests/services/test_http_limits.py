"""Bounded serving (services/http_limits.py start_http): idle, header-less and surplus connections are let go."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from services.http_limits import HttpLimits, start_http
from tests.tolerance import assert_at_most

WAIT_S = 10.0


async def _ok(_: web.Request) -> web.Response:
    return web.json_response({"ok": True})


@pytest.fixture
async def served():
    app = web.Application()
    app.router.add_get("/", _ok)
    runner, site = await start_http(app, "127.0.0.1", 0, HttpLimits(keepalive_s=0.3, max_connections=4))
    yield site
    await runner.cleanup()


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    loop = asyncio.get_running_loop()
    started = loop.time()
    data = await asyncio.wait_for(reader.read(), WAIT_S)
    assert_at_most(loop.time() - started, seconds, what="seconds until the server closed the connection")
    return data


async def test_a_silent_connection_is_closed_at_the_keepalive_timeout(served):
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    assert await _closed_within(reader, 3.0) == b""
    writer.close()


async def test_headers_trickled_byte_by_byte_do_not_hold_the_connection(served):
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)

    async def trickle() -> None:
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)

    sender = asyncio.ensure_future(trickle())
    try:
        assert await _closed_within(reader, 3.0) == b""  # slowloris: closed though bytes keep coming
    finally:
        sender.cancel()
        writer.close()


async def test_an_idle_keepalive_connection_is_closed_after_its_response(served):
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    assert head.startswith(b"HTTP/1.1 200")
    await _closed_within(reader, 3.0)
    writer.close()


async def test_connections_past_the_cap_get_a_503_and_the_held_ones_still_serve(served):
    held = [await asyncio.open_connection("127.0.0.1", served.port) for _ in range(4)]
    extra_reader, extra_writer = await asyncio.open_connection("127.0.0.1", served.port)
    answer = await asyncio.wait_for(extra_reader.read(), WAIT_S)  # answered and closed at once
    extra_writer.close()
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 503") and json.loads(body)["error"]["message"]
    assert served.refused == 1
    reader, writer = held[0]
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)).startswith(b"HTTP/1.1 200")
    for _, w in held:
        w.close()
