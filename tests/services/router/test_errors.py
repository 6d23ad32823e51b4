"""Every error the HTTP layer raises by itself comes back as an OpenAI-shaped JSON body."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from services.router.api import ApiError
from services.router.errors import json_errors


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
