"""The router's token feed: the feed port, each step's tokens to the requests it names, with their arrival time."""

from __future__ import annotations

import asyncio
import contextlib

from services.main_decode.feed import FeedTable
from services.main_decode.feed_server import FeedServer
from services.router.feed import TokenFeed, grpc_feed, tcp_feed
from services.rpc import feed_wire
from services.types import ErrorKind, RoleError
from tests.waiting import until


@contextlib.asynccontextmanager
async def open_feed(heartbeat_s: float = feed_wire.HEARTBEAT_S):
    """A feed port and the router's feed of it, once the port has said the feed is open."""
    feeds = FeedTable()
    server = FeedServer(feeds, "127.0.0.1", 0, heartbeat_s=heartbeat_s)
    await server.start()
    feed = TokenFeed(tcp_feed(f"127.0.0.1:{server.port}"), "decode")
    feed.start()
    try:
        await until(lambda: feed.open, "the feed opened", 5)
        yield feeds, server, feed
    finally:
        await feed.close()
        await server.close()


async def test_the_feed_port_carries_each_step_to_the_requests_it_names():
    async with open_feed() as (feeds, _, feed):
        inbox, other = feed.subscribe("r1"), feed.subscribe("r2")
        feeds.get("router").put("r1", 0, 11)
        feeds.get("router").put("r2", 5, 12)
        first, second = await asyncio.wait_for(inbox.get(), 5), await asyncio.wait_for(other.get(), 5)
        assert (first[:2], second[:2]) == ((0, 11), (5, 12))
        assert 0 < first.t <= asyncio.get_running_loop().time()  # the router's loop time at its step's arrival
        assert feed.tokens == 2


async def test_each_token_of_a_step_carries_the_time_the_step_arrived():
    feed = TokenFeed(grpc_feed(None), "decode")
    feed.open = True
    inboxes = feed.subscribe("a"), feed.subscribe("b")
    feed.deliver(["a", "b", "gone"], [0, 3, 9], [7, 8, 9])
    now = asyncio.get_running_loop().time()
    tokens = [await inbox.get() for inbox in inboxes]
    assert [t[:2] for t in tokens] == [(0, 7), (3, 8)]
    assert tokens[0].t == tokens[1].t and tokens[0].t <= now


async def test_a_feed_port_that_goes_away_fails_the_waiting_requests_with_why():
    async with open_feed() as (_, server, feed):
        inbox = feed.subscribe("r1")
        await server.close()
        failure = await asyncio.wait_for(inbox.get(), 5)
        assert isinstance(failure, RoleError) and failure.kind is ErrorKind.FAILED
        assert failure.message.startswith("token feed from decode broke (") and not feed.open


async def test_a_feed_port_that_falls_silent_is_hung_up_on(monkeypatch):
    monkeypatch.setattr(feed_wire, "SILENT_S", 0.2)
    async with open_feed(heartbeat_s=60) as (_, _, feed):  # opens, then sends nothing
        inbox = feed.subscribe("r1")
        failure = await asyncio.wait_for(inbox.get(), 5)
        assert failure.message == "token feed from decode broke (nothing for 0.2 s)"


async def test_a_feed_port_nobody_listens_on_leaves_the_feed_closed_and_requests_on_their_calls():
    feed = TokenFeed(tcp_feed("127.0.0.1:1"), "decode")
    reason = await asyncio.wait_for(feed.connect(feed), 5)
    assert reason.startswith("cannot connect to 127.0.0.1:1") and feed.subscribe("r1") is None
