"""The router's view of a decode stream whose tokens come through the feed, in whatever order; the feed port."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest

from services.main_decode.feed import FeedTable
from services.main_decode.feed_server import FeedServer
from services.router.failures import api_error
from services.router.feed import DecodeStream, Token, TokenFeed, grpc_feed, tcp_feed
from services.rpc import TOKEN_FEED_METADATA, feed_wire, pb
from services.types import ErrorKind, RoleError


class _Call:
    """A Generate call that yields the given events, then ends."""

    def __init__(self, events, gate: asyncio.Event | None = None) -> None:
        self.events, self.gate, self.cancelled = events, gate, False

    def __aiter__(self):
        return self._run()

    async def _run(self):
        for event in self.events:
            if self.gate is not None:
                await self.gate.wait()
            if isinstance(event, BaseException):
                raise event
            yield event

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class _Stub:
    def __init__(self, call: _Call) -> None:
        self.call, self.metadata = call, None

    def Generate(self, request, metadata):  # noqa: N802 (the gRPC method's name)
        self.metadata = dict(metadata)
        return self.call


def _stats(end: int) -> pb.GenerateEvent:
    return pb.GenerateEvent(stats=pb.GenerateStats(instance="decode-0", end_position=end))


def _open_feed(stub) -> TokenFeed:
    feed = TokenFeed(grpc_feed(stub), "decode")
    feed.open = True  # as after the service's opening message
    return feed


async def _collect(stream: DecodeStream) -> list:
    return [item async for item in stream]


async def test_stats_that_overtake_the_feed_are_held_until_every_token_has_come():
    stub = _Stub(_Call([_stats(3)]))
    feed = _open_feed(stub)
    stream = DecodeStream(stub, pb.GenerateRequest(request_id="r1"), feed)
    assert stub.metadata[TOKEN_FEED_METADATA] == "router" and "r1" in feed.routes
    reading = asyncio.ensure_future(_collect(stream))
    for _ in range(5):
        await asyncio.sleep(0)  # the call's stats and end have arrived; no token yet
    assert not reading.done()
    for position in range(3):
        feed.routes["r1"].put(Token(position, 10 + position))
    items = await asyncio.wait_for(reading, 5)
    assert items[:3] == [Token(0, 10), Token(1, 11), Token(2, 12)] and items[3].end_position == 3
    assert "r1" not in feed.routes  # unsubscribed at the end


async def test_without_an_open_feed_tokens_come_in_the_generate_stream():
    events = [pb.GenerateEvent(token=pb.TokenEvent(position=0, token=5)), _stats(1)]
    stub = _Stub(_Call(events))
    feed = TokenFeed(grpc_feed(stub), "decode")  # not open yet
    items = await _collect(DecodeStream(stub, pb.GenerateRequest(request_id="r2"), feed))
    assert TOKEN_FEED_METADATA not in stub.metadata and items[0] == Token(0, 5) and items[1].end_position == 1


async def test_a_broken_feed_fails_its_streams_instead_of_leaving_them_waiting():
    gate = asyncio.Event()
    stub = _Stub(_Call([_stats(2)], gate))
    feed = _open_feed(stub)
    stream = DecodeStream(stub, pb.GenerateRequest(request_id="r3"), feed)
    reading = asyncio.ensure_future(_collect(stream))
    await asyncio.sleep(0)
    feed.routes["r3"].put(Token(0, 1))
    feed._fail_all("the service restarted")
    with pytest.raises(RoleError) as failure:
        await asyncio.wait_for(reading, 5)
    assert failure.value.kind is ErrorKind.FAILED and failure.value.code is None  # the router's side broke
    error = api_error(failure.value, "decode")  # it names itself, as it always has
    assert (error.status, error.code) == (502, None)
    assert error.message == "token feed from decode broke (the service restarted)"


@pytest.mark.parametrize("feed_open", [True, False])
async def test_a_failed_call_reaches_the_reader_as_the_role_error_of_its_status(feed_open):
    refused = grpc.aio.AioRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                   details="engine full")
    stub = _Stub(_Call([refused]))
    feed = _open_feed(stub) if feed_open else TokenFeed(grpc_feed(stub), "decode")
    with pytest.raises(RoleError) as failure:
        await asyncio.wait_for(_collect(DecodeStream(stub, pb.GenerateRequest(request_id="r4"), feed)), 5)
    assert (failure.value.kind, failure.value.message, failure.value.code) == \
        (ErrorKind.EXHAUSTED, "engine full", "RESOURCE_EXHAUSTED")


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def open_feed(heartbeat_s: float = feed_wire.HEARTBEAT_S):
    """A feed port and the router's feed of it, once the port has said the feed is open."""
    feeds = FeedTable()
    server = FeedServer(feeds, "127.0.0.1", 0, heartbeat_s=heartbeat_s)
    await server.start()
    feed = TokenFeed(tcp_feed(f"127.0.0.1:{server.port}"), "decode")
    feed.start()
    try:
        await asyncio.wait_for(_until(lambda: feed.open), 5)
        yield feeds, server, feed
    finally:
        await feed.close()
        await server.close()


async def test_the_feed_port_carries_each_step_to_the_requests_it_names():
    async with open_feed() as (feeds, _, feed):
        inbox, other = feed.subscribe("r1"), feed.subscribe("r2")
        feeds.get("router").put("r1", 0, 11)
        feeds.get("router").put("r2", 5, 12)
        assert await asyncio.wait_for(inbox.get(), 5) == Token(0, 11)
        assert await asyncio.wait_for(other.get(), 5) == Token(5, 12)
        assert feed.tokens == 2


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
