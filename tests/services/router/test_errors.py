"""Every error the HTTP layer raises by itself comes back as an OpenAI-shaped JSON body."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from services.http_limits import HttpLimits, start_http
from services.launcher.plan import build_plan
from services.router.api import ApiError
from services.router.errors import json_errors
from services.router.server import build_app
from services.scenario import load_scenario


async def _fails(request: web.Request) -> web.Response:
    raise ApiError(409, "taken", code="duplicate_request_id")


async def _defect(request: web.Request) -> web.Response:
    raise KeyError("oops")


async def _reads(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response({})


@pytest.fixture
async def client():
    app = web.Application(middlewares=[json_errors], client_max_size=1024)
    app.router.add_post("/v1/completions", _reads)
    app.router.add_get("/fails", _fails)
    app.router.add_get("/defect", _defect)
    async with TestClient(TestServer(app)) as c:
        yield c


def _is_openai_error(body: dict) -> None:
    assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["message"]


@pytest.mark.parametrize("method, path, status, fragment", [
    ("GET", "/v1/nothing-here", 404, "Invalid URL (GET /v1/nothing-here)"),
    ("GET", "/v1/completions", 405, "GET is not allowed"),
    ("GET", "/fails", 409, "taken"),
    ("GET", "/defect", 500, "KeyError"),
])
async def test_errors_are_json(client, method, path, status, fragment):
    reply = await client.request(method, path)
    assert reply.status == status and reply.content_type == "application/json"
    body = await reply.json()
    _is_openai_error(body)
    assert fragment in body["error"]["message"]


async def test_405_keeps_the_allow_header(client):
    reply = await client.get("/v1/completions")
    assert reply.headers["Allow"] == "POST"


async def test_a_body_past_the_limit_is_a_json_413(client):
    reply = await client.post("/v1/completions", data=b"x" * 4096)
    assert reply.status == 413 and reply.content_type == "application/json"
    _is_openai_error(await reply.json())


# What aiohttp refuses before any route or middleware runs, sent as raw bytes to the router as it serves.
MALFORMED = {
    "not HTTP": b"GARBAGE\r\n\r\n",
    "a control byte in the method": b"G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n",
    "an unknown method": b"FOO /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n",
    "a header without a colon": b"GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    "a request line past 8 KiB": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "a header past 8 KiB": b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 9000 + b"\r\n\r\n",
    "an unknown HTTP version": b"GET /v1/models HTTP/9.9\r\nHost: x\r\n\r\n",
    "an HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "a Content-Length that is not a number": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    "two Content-Lengths": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "a broken chunk size": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    "a text body": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
    "a form body": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                   b"Content-Length: 7\r\n\r\na=b&c=d",
    "a body past 4 MiB": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
    "an unknown route": b"GET /v1/engines HTTP/1.1\r\nHost: x\r\n\r\n",
    "a wrong method on a route": b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
}


@pytest.fixture
async def router_port():
    app = build_app(build_plan(load_scenario("colocated-mini")))
    runner, site = await start_http(app, "127.0.0.1", 0, HttpLimits(keepalive_s=5), handler_cancellation=True)
    yield site.port
    await runner.cleanup()


async def _raw_answer(port: int, raw: bytes) -> tuple[int, str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        body = await asyncio.wait_for(reader.readexactly(int(headers["Content-Length"])), 10)
        return int(lines[0].split()[1]), headers.get("Content-Type", ""), body
    finally:
        writer.close()


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_every_refusal_of_the_router_is_an_openai_json_error(router_port, case):
    status, content_type, body = await _raw_answer(router_port, MALFORMED[case])
    assert 400 <= status < 500 and content_type.startswith("application/json"), (status, content_type, body)
    _is_openai_error(json.loads(body))
    assert json.loads(body)["error"]["type"] == "invalid_request_error"


async def test_the_router_serves_after_malformed_requests(router_port):
    for raw in MALFORMED.values():
        await _raw_answer(router_port, raw)
    status, _, body = await _raw_answer(router_port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and json.loads(body)["data"][0]["id"] == "llama3-8b"
