"""The router's view of a decode stream whose tokens come through the feed, in whatever order."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from services.roles import TokenRun
from services.router.decode_stream import DecodeStream
from services.router.failures import api_error
from services.router.feed import Token, TokenFeed, grpc_feed
from services.rpc import TOKEN_FEED_METADATA, pb
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


def _flat(items: list) -> list:
    """The items with each TokenRun spelled out as its tokens."""
    return [t for item in items for t in (item if type(item) is TokenRun else (item,))]


@pytest.mark.parametrize("lazy", [False, True])
async def test_stats_that_overtake_the_feed_are_held_until_every_token_has_come(lazy):
    stub = _Stub(_Call([_stats(3)]))
    feed = _open_feed(stub)
    stream = DecodeStream(stub, pb.GenerateRequest(request_id="r1"), feed, lazy)
    assert stub.metadata[TOKEN_FEED_METADATA] == "router" and "r1" in feed.routes
    reading = asyncio.ensure_future(_collect(stream))
    for _ in range(5):
        await asyncio.sleep(0)  # the call's stats and end have arrived; no token yet
    assert not reading.done()
    for position in range(3):
        feed.routes["r1"].put(Token(position, 10 + position))
    items = _flat(await asyncio.wait_for(reading, 5))
    assert items[:3] == [Token(0, 10), Token(1, 11), Token(2, 12)] and items[3].end_position == 3
    assert items[0].t == 0.0  # put by hand, not by a feed: no arrival time
    assert "r1" not in feed.routes  # unsubscribed at the end


async def test_without_an_open_feed_tokens_come_in_the_generate_stream():
    events = [pb.GenerateEvent(token=pb.TokenEvent(position=0, token=5)), _stats(1)]
    stub = _Stub(_Call(events))
    feed = TokenFeed(grpc_feed(stub), "decode")  # not open yet
    items = await _collect(DecodeStream(stub, pb.GenerateRequest(request_id="r2"), feed))
    assert TOKEN_FEED_METADATA not in stub.metadata and items[0][:2] == (0, 5) and items[1].end_position == 1
    assert 0 < items[0].t <= asyncio.get_running_loop().time()  # stamped as it arrived


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


async def test_a_lazy_inbox_wakes_its_reader_for_the_first_token_and_for_what_ends_the_stream():
    stub = _Stub(_Call([_stats(4)], asyncio.Event()))  # the stats wait for the gate
    feed = _open_feed(stub)
    stream = DecodeStream(stub, pb.GenerateRequest(request_id="r5"), feed, lazy=True)
    inbox, seen = feed.routes["r5"], []

    async def read():
        async for item in stream:
            seen.append(item)
    reading = asyncio.ensure_future(read())
    await asyncio.sleep(0)
    feed.deliver(["r5"], [0], [10])
    for _ in range(3):
        await asyncio.sleep(0)
    assert [t[:2] for t in seen] == [(0, 10)]  # the first token woke it
    for position in (1, 2, 3):
        feed.deliver(["r5"], [position], [10 + position])
        for _ in range(3):
            await asyncio.sleep(0)
    assert len(seen) == 1 and len(inbox._items) == 3  # the rest wait, with no reader woken for them
    stub.call.gate.set()  # the call's stats arrive: the reader takes the waiting tokens as one run, then the stats
    await asyncio.wait_for(reading, 5)
    assert type(seen[1]) is TokenRun and len(seen) == 3 and seen[2].end_position == 4
    tokens = _flat(seen)[:4]
    assert [t[:2] for t in tokens] == [(0, 10), (1, 11), (2, 12), (3, 13)]
    assert tokens[1].t < tokens[3].t  # each keeps its own arrival time, not the time it was read


async def test_a_lazy_stream_whose_stats_came_first_is_woken_by_each_token_it_still_waits_for():
    stub = _Stub(_Call([_stats(3)], asyncio.Event()))
    feed = _open_feed(stub)
    reading = asyncio.ensure_future(_collect(DecodeStream(stub, pb.GenerateRequest(request_id="r6"), feed, lazy=True)))
    await asyncio.sleep(0)
    feed.deliver(["r6"], [0], [10])  # the first token wakes the reader
    stub.call.gate.set()  # then the stats (end 3) overtake tokens 1 and 2
    for position in (1, 2):
        for _ in range(5):
            await asyncio.sleep(0)
        feed.deliver(["r6"], [position], [10 + position])
    items = _flat(await asyncio.wait_for(reading, 5))
    assert [t[:2] for t in items[:3]] == [(0, 10), (1, 11), (2, 12)] and items[3].end_position == 3


class _Reply:
    """A GenerateFed call: awaited for its one reply (or its error), stopped by cancel()."""

    def __init__(self, reply) -> None:
        self.reply, self.cancelled = reply, False

    def __await__(self):
        return self._answer().__await__()

    async def _answer(self):
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class _FedStub(_Stub):
    def __init__(self, call: _Call, reply: _Reply) -> None:
        super().__init__(call)
        self.reply, self.methods = reply, []

    def Generate(self, request, metadata):  # noqa: N802
        self.methods.append("Generate")
        return super().Generate(request, metadata)

    def GenerateFed(self, request, metadata):  # noqa: N802
        self.methods.append("GenerateFed")
        self.metadata = dict(metadata)
        return self.reply


async def test_a_fed_unary_stream_makes_generate_fed_and_holds_its_reply_until_every_token_has_come():
    stub = _FedStub(_Call([]), _Reply(_stats(2)))
    feed = _open_feed(stub)
    stream = DecodeStream(stub, pb.GenerateRequest(request_id="f1"), feed, fed_unary=True)
    assert stub.methods == ["GenerateFed"] and stub.metadata[TOKEN_FEED_METADATA] == "router"
    reading = asyncio.ensure_future(_collect(stream))
    for _ in range(5):
        await asyncio.sleep(0)  # the reply has come; no token yet
    assert not reading.done()
    feed.routes["f1"].put(Token(0, 7))
    feed.routes["f1"].put(Token(1, 8))
    items = await asyncio.wait_for(reading, 5)
    assert [t[:2] for t in items[:2]] == [(0, 7), (1, 8)] and items[2].end_position == 2
    stream.cancel()
    assert stub.reply.cancelled  # cancel() reaches the unary call


async def test_without_an_open_feed_a_fed_unary_stream_is_the_generate_stream():
    events = [pb.GenerateEvent(token=pb.TokenEvent(position=0, token=5)), _stats(1)]
    stub = _FedStub(_Call(events), _Reply(_stats(1)))
    feed = TokenFeed(grpc_feed(stub), "decode")  # not open yet
    items = await _collect(DecodeStream(stub, pb.GenerateRequest(request_id="f2"), feed, fed_unary=True))
    assert stub.methods == ["Generate"] and items[0][:2] == (0, 5) and items[1].end_position == 1


async def test_a_failed_fed_call_reaches_the_reader_as_the_role_error_of_its_status():
    refused = grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                   details="the call names no token feed open here")
    stub = _FedStub(_Call([]), _Reply(refused))
    with pytest.raises(RoleError) as failure:
        await asyncio.wait_for(_collect(DecodeStream(stub, pb.GenerateRequest(request_id="f3"), _open_feed(stub),
                                                     fed_unary=True)), 5)
    assert (failure.value.kind, failure.value.code) == (ErrorKind.UNAVAILABLE, "UNAVAILABLE")
