"""The token feed handed over in process: in order, across the control link at its frames' sizes, ended as a port's."""

from __future__ import annotations

import asyncio

import pytest

from netem.config import LinkConfig
from netem.virtual import VirtualLink
from services.main_decode.feed import FeedTable
from services.rpc import feed_wire, pb
from services.scenario.loader import load_scenario
from services.simulate.feedport import PushedFeed
from services.simulate.outage import OutageMesh
from services.simulate.wiring import simulated_plan
from tests.services.simulate.on_virtual_time import on_virtual_time
from tests.waiting import until

DELAY_S = 0.02
DEADLINE_S = 5.0  # virtual seconds


class Received:
    def __init__(self) -> None:
        self.steps: list[tuple[float, list, list, list]] = []
        self.arrived = asyncio.Event()

    def deliver(self, ids: list, positions: list, tokens: list) -> None:
        self.steps.append((asyncio.get_running_loop().time(), list(ids), list(positions), list(tokens)))
        self.arrived.set()

    async def next(self) -> None:
        self.arrived.clear()
        async with asyncio.timeout(DEADLINE_S):
            await self.arrived.wait()


def test_within_a_datacenter_one_steps_tokens_arrive_as_one_batch_after_the_open_step():
    async def main():
        feeds, received = FeedTable(), Received()
        pushed = PushedFeed(feeds, "router", received.deliver)
        waiting = asyncio.ensure_future(pushed.wait())
        await received.next()
        assert received.steps == [(0.0, [], [], [])]  # the feed says it is open
        feed = feeds.get("router")
        feed.put("a", 0, 7)
        feed.put("b", 3, 9)  # the same loop pass: the same step
        await received.next()
        assert received.steps[1][1:] == (["a", "b"], [0, 3], [7, 9])
        waiting.cancel()  # the router hangs up
        await asyncio.gather(waiting, return_exceptions=True)
        assert len(feeds) == 0 and feed.closed

    on_virtual_time(main)


def test_across_datacenters_each_batch_crosses_the_link_at_its_frames_size_in_order():
    async def main():
        async with VirtualLink(LinkConfig.symmetric(delay=f"{DELAY_S * 1000:g}ms", rate="1mbit"), seed=1) as link:
            wire, feeds, received = link.connect(), FeedTable(), Received()
            pushed = PushedFeed(feeds, "router", received.deliver, wire)
            waiting = asyncio.ensure_future(pushed.wait())
            await received.next()
            assert received.steps[0][0] >= 2 * DELAY_S  # the hello up, then the open step down
            feed, sent_at = feeds.get("router"), asyncio.get_running_loop().time()
            for position in range(3):
                feed.put("a", position, 100 + position)
                await asyncio.sleep(0.001)  # three steps, each its own message
            while len(received.steps) < 4:
                await received.next()
            times = [t for t, *_ in received.steps[1:]]
            assert [s[2] for s in received.steps[1:]] == [[0], [1], [2]]
            assert times == sorted(times) and times[0] >= sent_at + DELAY_S
            frames = [feed_wire.hello("router"), feed_wire.EMPTY_STEP,
                      *(feed_wire.step(["a"], [p], [100 + p]) for p in range(3))]
            assert link.stats()["down"]["bytes"] + link.stats()["up"]["bytes"] == sum(map(len, frames))
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)

    on_virtual_time(main)


def test_a_router_that_hangs_up_before_the_hello_arrives_leaves_no_feed_open():
    async def main():
        async with VirtualLink(LinkConfig.symmetric(delay=f"{DELAY_S * 1000:g}ms"), seed=1) as link:
            feeds, received = FeedTable(), Received()
            waiting = asyncio.ensure_future(PushedFeed(feeds, "router", received.deliver, link.connect()).wait())
            await asyncio.sleep(DELAY_S / 2)  # the hello is still crossing
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            await asyncio.sleep(4 * DELAY_S)
            assert len(feeds) == 0 and received.steps == []

    on_virtual_time(main)


def test_a_reset_ends_the_feed_and_drops_the_batch_still_crossing():
    async def main():
        async with VirtualLink(LinkConfig.symmetric(delay=f"{DELAY_S * 1000:g}ms"), seed=1) as link:
            wire, feeds, received = link.connect(), FeedTable(), Received()
            pushed = PushedFeed(feeds, "router", received.deliver, wire)
            await received.next()
            feeds.get("router").put("a", 0, 1)
            await asyncio.sleep(DELAY_S / 2)
            link.reset_connections()
            async with asyncio.timeout(DEADLINE_S):
                reason = await pushed.wait()
            assert "connection reset" in reason
            assert len(received.steps) == 1 and len(feeds) == 0

    on_virtual_time(main)


def test_a_kill_of_the_decode_service_ends_its_feed_and_a_dead_service_refuses_a_new_one():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            stub, received = mesh.stub("main-decode", "router"), Received()
            pushed = stub.open_tokens(pb.TokensRequest(subscriber="test"), received.deliver)
            await received.next()
            assert len(mesh.servicers["main-decode"].feeds) == 1
            mesh.kill("main-decode")
            async with asyncio.timeout(DEADLINE_S):
                reason = await pushed.wait()
            assert reason == "the server's connection was reset"
            refused = stub.open_tokens(pb.TokensRequest(subscriber="test"), received.deliver)
            assert isinstance(refused, str) and "connection refused" in refused
            await mesh.restart("main-decode")

    on_virtual_time(main)


@pytest.mark.parametrize("preset", ["pdd-mini", "pd-intra-mini"])
def test_the_router_reads_every_decode_feed_pushed(preset):
    async def main():
        async with OutageMesh(simulated_plan(load_scenario(preset))) as mesh:
            peers = mesh.router.peers
            for name, feed in peers.feeds.items():
                feed.start()
            await until(lambda: all(feed.open for feed in peers.feeds.values()), "every feed open", DEADLINE_S)
            assert all(len(mesh.servicers[name].feeds) == 1 for name in peers.feeds)

    on_virtual_time(main)
