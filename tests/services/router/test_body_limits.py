"""Large and slow bodies at a real router: refused before parsing, without stalling other streams."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import aiohttp
import pytest
from aiohttp import web

from services.router import api
from services.router.api import CompletionRequest, parse_body
from tests.integration.mesh import running_mesh
from tests.tolerance import assert_at_most

MODEL = "llama3-8b"
BAD_REQUEST = """
import json, sys, urllib.error, urllib.request
body = json.dumps({"model": "llama3-8b", "prompt": "bada " * 2_000_000, "max_tokens": 4}).encode()  # 10 MB
request = urllib.request.Request(sys.argv[1] + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
try:
    urllib.request.urlopen(request, timeout=60)
    print("accepted")
except urllib.error.HTTPError as exc:
    print(exc.code, json.loads(exc.read())["error"]["message"])
except (ConnectionError, urllib.error.URLError) as exc:  # the router may close before the upload ends
    print("closed", exc)
"""


def _largest_gap(url: str, prompt: list[int], tokens: int, during=None) -> float:
    """Stream `tokens` tokens; while it streams, run `during()` in a thread; the largest gap between chunks."""
    async def run() -> float:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            body = {"model": MODEL, "prompt": prompt, "max_tokens": tokens, "stream": True}
            async with session.post(f"{url}/v1/completions", json=body) as reply:
                assert reply.status == 200
                stamps, thread = [], None
                async for line in reply.content:
                    if line.startswith(b"data: {"):
                        stamps.append(time.perf_counter())
                        if len(stamps) == 20 and during is not None:
                            thread = threading.Thread(target=during)
                            thread.start()
                if thread is not None:
                    thread.join(60)
                assert len(stamps) == tokens + 1  # every token and the final chunk
                return max(b - a for a, b in zip(stamps[10:], stamps[11:]))

    return asyncio.run(run())


@pytest.mark.integration
def test_a_10_mb_bad_body_is_refused_without_stalling_a_concurrent_stream(tmp_path):
    refused = []

    def bad_request() -> None:
        # In its own process, so that building and sending 10 MB does not pause this one's measurements.
        done = subprocess.run([sys.executable, "-c", BAD_REQUEST, url], capture_output=True, text=True, timeout=60)
        refused.append(done.stdout.strip())

    with running_mesh("colocated-mini", tmp_path) as url:
        quiet = _largest_gap(url, [5, 6, 7, 8], 300)
        loaded = _largest_gap(url, [9, 10, 11, 12], 300, during=bad_request)
    print(f"largest gap: {quiet * 1e3:.1f} ms quiet, {loaded * 1e3:.1f} ms while a 10 MB body was refused")
    assert_at_most(loaded, max(0.050, quiet + 0.020), what="largest gap while a 10 MB body was refused (s)")
    assert refused and refused[0].startswith(("413", "closed")), refused  # over the cap: refused unparsed


async def test_a_body_that_trickles_in_past_the_deadline_is_a_408(monkeypatch):
    monkeypatch.setattr(api, "BODY_READ_S", 0.3)

    async def handler(request: web.Request) -> web.Response:
        try:
            await parse_body(request, CompletionRequest)
        except api.ApiError as exc:
            return web.json_response(exc.body(), status=exc.status)
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
        body = await asyncio.wait_for(reader.readexactly(length), 10)
        writer.close()
    finally:
        await runner.cleanup()
    assert head.startswith(b"HTTP/1.1 408") and "not received" in json.loads(body)["error"]["message"]
