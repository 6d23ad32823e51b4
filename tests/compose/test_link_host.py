"""link_host: a runner's links in one process, shaped as planned, with their control APIs and one status port."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from services.launcher.link_host import LinkHost, status_app
from tests.compose.local_plan import TOKEN, local_plan
from tests.netem.servers import Echo, Recorder
from tests.tolerance import assert_at_least

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _json(session: aiohttp.ClientSession, method: str, url: str, **kwargs) -> tuple[int, dict]:
    async with session.request(method, url, timeout=aiohttp.ClientTimeout(total=10), **kwargs) as reply:
        return reply.status, await reply.json()


@pytest.fixture
async def wan_host():
    async with Recorder() as kv_sink, Echo() as grpc_echo:
        plan = local_plan("pdd-mini", {"prefill-to-main-decode": kv_sink.address,
                                       "dc-a-to-main-decode-grpc": grpc_echo.address})
        host = LinkHost(plan, "wan-link", bind_host="127.0.0.1", token=TOKEN)
        await host.start()
        try:
            yield host, kv_sink
        finally:
            await host.stop()


def _link(host: LinkHost, name: str):
    return next(r.plan for r in host.links if r.plan.name == name)


async def test_runner_starts_exactly_its_links_with_kv_rates_scaled_and_control_rates_not(wan_host):
    host, _ = wan_host
    assert sorted(r.plan.name for r in host.links) == sorted(
        l.name for l in host.plan.links if l.runner == "wan-link")
    async with aiohttp.ClientSession(headers=AUTH) as session:
        for running in host.links:
            status, config = await _json(session, "GET", f"http://127.0.0.1:{running.plan.control_port}/config")
            assert status == 200 and config["up"]["delay"] == pytest.approx(0.005)
            expected = 10e9 / 1000 if running.plan.purpose == "kv" else 10e9
            assert config["up"]["rate"] == pytest.approx(expected) == config["down"]["rate"]


async def test_kv_bytes_cross_at_the_scaled_rate_and_show_in_the_combined_stats(wan_host):
    host, kv_sink = wan_host
    link = _link(host, "prefill-to-main-decode")
    payload = bytes(250_000)  # 0.2 s at the real rate of 10 Mbit/s
    started = time.monotonic()
    _, writer = await asyncio.open_connection("127.0.0.1", link.listen_port)
    writer.write(payload)
    await writer.drain()
    received = await (await kv_sink.connection()).wait_for_bytes(len(payload))
    assert_at_least(time.monotonic() - started, 0.19, "transfer time at 10 Mbit/s")
    writer.close()
    assert received == payload
    runner = aiohttp.web.AppRunner(status_app(host))
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session:  # read-only: no token
            _, stats = await _json(session, "GET", f"http://127.0.0.1:{port}/stats")
            _, health = await _json(session, "GET", f"http://127.0.0.1:{port}/health")
    finally:
        await runner.cleanup()
    assert stats["prefill-to-main-decode"]["up"]["bytes"] == len(payload)
    assert stats["prefill-to-main-decode"]["purpose"] == "kv"
    assert health["status"] == "ok" and set(health["links"]) == set(stats)


async def test_a_control_route_adds_the_wan_delay_each_way(wan_host):
    host, _ = wan_host
    link = _link(host, "dc-a-to-main-decode-grpc")
    reader, writer = await asyncio.open_connection("127.0.0.1", link.listen_port)
    started = time.monotonic()
    writer.write(b"ping")
    await writer.drain()
    assert await asyncio.wait_for(reader.readexactly(4), 10) == b"ping"
    assert_at_least(time.monotonic() - started, 2 * 0.005, "round trip over two 5 ms delays")
    writer.close()


async def test_the_control_api_refuses_calls_without_the_token(wan_host):
    host, _ = wan_host
    link = _link(host, "prefill-to-main-decode")
    async with aiohttp.ClientSession() as session:
        status, _ = await _json(session, "PATCH", f"http://127.0.0.1:{link.control_port}/config",
                                json={"both": {"delay": "1s"}})
    assert status == 401


async def test_a_runner_the_plan_leaves_empty_runs_no_links():
    host = LinkHost(local_plan("pd-cross-mini"), "rdma-link", bind_host="127.0.0.1", token=TOKEN)
    await host.start()
    assert host.links == [] and host.health()["links"] == {}
    await host.stop()
