"""The links as the page shows them: a real link and its control API, read by the dashboard's LinkWatch."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from netem.client import ControlClient
from netem.config import LinkConfig
from netem.control import ControlServer
from netem.link import UserspaceLink
from services.launcher.plan import build_plan
from services.router.dashboard.links import LinkWatch, changes
from services.scenario import load_scenario
from services.scenario.plan import MeshPlan
from tests.netem.servers import Recorder

REAL_RATE_BPS = 8e6  # 8 Gbit/s emulated at pdd-mini's byte_scale of 1000
NAME = "prefill-to-main-decode"


def _plan(control_port: int) -> MeshPlan:
    """pdd-mini's plan with its WAN KV link's control API at `control_port`, and only that KV link."""
    plan = build_plan(load_scenario("pdd-mini"))
    wan = plan.link("prefill", "main-decode").model_copy(update={"control_port": control_port})
    return plan.model_copy(update={"links": (wan,)})


class Served:
    def __init__(self, token: str | None = None) -> None:
        self.token = token

    async def __aenter__(self) -> Served:
        self.upstream = await Recorder().__aenter__()
        self.link = await UserspaceLink(("127.0.0.1", 0), self.upstream.address,
                                        LinkConfig.symmetric(rate=REAL_RATE_BPS), seed=1).start()
        self.control = ControlServer(self.link, "127.0.0.1", 0, token=self.token)
        self.port = (await self.control.start())[1]
        self.http = aiohttp.ClientSession()
        self.api = ControlClient(self.http, f"http://127.0.0.1:{self.port}", self.token)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.close()
        await self.control.stop()
        await self.link.stop()
        await self.upstream.__aexit__(*exc)


async def test_throughput_rate_and_queue_are_in_emulated_units():
    async with Served() as served:
        watch = LinkWatch(_plan(served.port), served.http, None)
        before_first = time.monotonic()
        figures, events = await watch.poll()
        after_first = time.monotonic()
        assert figures[NAME]["bps"] is None and events == []  # one read: no rate yet
        assert figures[NAME]["rate_bps"] == pytest.approx(REAL_RATE_BPS * 1000)
        assert figures[NAME]["queue_limit_bytes"] == served.link.stats()["up"]["queue_limit_bytes"] * 1000
        _, writer = await asyncio.open_connection(*served.link.listen_address)
        writer.write(b"k" * 200_000)
        await (await served.upstream.connection()).wait_for_bytes(200_000)
        before_second = time.monotonic()
        figures, _ = await watch.poll()
        after_second = time.monotonic()
        sent_bits = 200_000 * 8 * 1000
        assert sent_bits / (after_second - before_first) <= figures[NAME]["bps"] <= \
            sent_bits / (before_second - after_first)
        writer.close()


async def test_a_reconfiguration_a_partition_and_its_healing_are_one_event_each():
    async with Served() as served:
        watch = LinkWatch(_plan(served.port), served.http, None)
        await watch.poll()
        await served.api.patch_config({"both": {"rate": REAL_RATE_BPS / 2, "delay": "20ms"}})
        figures, events = await watch.poll()
        assert events == [f"link {NAME} reconfigured: rate 8gbit -> 4gbit, delay 0 ms -> 20 ms"]
        assert figures[NAME]["rate_bps"] == pytest.approx(REAL_RATE_BPS / 2 * 1000)
        await served.api.partition("blackhole")
        figures, events = await watch.poll()
        assert events == [f"link {NAME} partitioned (blackhole)"] and figures[NAME]["partition"] == "blackhole"
        await served.api.heal()
        assert (await watch.poll())[1] == [f"link {NAME} healed"]
        assert (await watch.poll())[1] == []  # nothing changed, nothing said


async def test_a_link_that_stops_answering_is_said_once_and_again_when_it_is_back():
    async with Served() as served:
        watch = LinkWatch(_plan(served.port), served.http, None)
        await watch.poll()
        await served.control.stop()
        figures, events = await watch.poll()
        assert "error" in figures[NAME] and len(events) == 1 and events[0].startswith(f"link {NAME} does not answer")
        assert (await watch.poll())[1] == []
        served.control = ControlServer(served.link, "127.0.0.1", served.port)
        await served.control.start()
        assert (await watch.poll())[1] == [f"link {NAME} answers again"]


async def test_a_link_behind_a_token_is_read_with_the_routers_token():
    async with Served(token="s3cret") as served:
        figures, _ = await LinkWatch(_plan(served.port), served.http, "s3cret").poll()
        assert figures[NAME]["rate_bps"] == pytest.approx(REAL_RATE_BPS * 1000)
        figures, events = await LinkWatch(_plan(served.port), served.http, None).poll()
        assert "HTTP 401" in figures[NAME]["error"] and "HTTP 401" in events[0]


def test_a_change_of_the_down_direction_alone_is_named_as_such():
    before = {"up": {"rate": 1e6, "delay": 0.01}, "down": {"rate": 1e6, "delay": 0.01}}
    after = {"up": {"rate": 1e6, "delay": 0.01}, "down": {"rate": 1e6, "delay": 0.03}}
    assert changes(before, after, divisor=1000) == ["delay 10 ms -> 30 ms (down)"]
    assert changes(before, {**after, "up": after["down"]}, divisor=1000) == ["delay 10 ms -> 30 ms"]
