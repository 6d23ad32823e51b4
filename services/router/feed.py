"""The router's side of the token feed: one feed per decode service, and the streams that read it.

Each decode service sends one message per engine step carrying the tokens of
every request of this router that the step advanced (services/main_decode/
feed.py, docs/mesh.md §Token feed), on its feed port (`tcp_feed`) or, without
one, as the `Tokens` gRPC stream (`grpc_feed`), which a simulation's stub hands over
in process instead, as the port would (services/simulate/feedport.py). `TokenFeed` hands them to
the waiting requests' inboxes (an `EventChannel`, or a `LazyInbox` in a simulation),
which services/router/decode_stream.py reads. A broken feed reaches each waiting request as a RoleError of its own, with
no status (services/router/failures.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

import grpc
import msgpack

from services.engine.sequence import EventChannel
from services.roles import Token
from services.rpc import feed_wire, pb, pb_grpc
from services.types import ErrorKind, RoleError

log = logging.getLogger(__name__)
SUBSCRIBER = "router"
REOPEN_S = 0.5  # a feed that broke (its service restarting) is tried again this often
_new_tuple = tuple.__new__  # Token(position, token_id) runs NamedTuple's Python __new__; this builds it in C


# Runs one connection of a feed, handing its steps to `TokenFeed.deliver`; returns why it ended.
FeedConnect = Callable[["TokenFeed"], Awaitable[str]]


class TokenFeed:
    """The long-lived feed of one decode service, reopened whenever it breaks."""

    def __init__(self, connect: FeedConnect, service: str) -> None:
        self.connect, self.service = connect, service
        self.open = False  # requests use the feed only once the service has said it is open
        self.routes: dict[str, EventChannel] = {}
        self.messages = self.tokens = 0  # how well steps batch: tokens / messages
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Open the feed; called with the first request to the service, once its channel has connected.

        Opening it at the router's start would race the service's own start-up, and a refused
        connection puts the whole channel into reconnect backoff, failing the first requests.
        """
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"token-feed-{self.service}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def subscribe(self, request_id: str, lazy: bool = False) -> EventChannel | None:
        if not self.open:
            return None
        # The mesh's inbox is the plain channel: a lazy one's checks would cost every token a method call.
        inbox = self.routes[request_id] = LazyInbox() if lazy else EventChannel()
        return inbox

    def unsubscribe(self, request_id: str) -> None:
        self.routes.pop(request_id, None)

    def deliver(self, request_ids, positions, tokens) -> None:
        """One step's tokens, parallel sequences; an empty step says the feed is open (or still alive)."""
        self.open = True
        self.messages += 1
        self.tokens += len(positions)
        routes = self.routes
        now = asyncio.get_running_loop().time()
        for rid, position, token in zip(request_ids, positions, tokens):
            inbox = routes.get(rid)
            if inbox is not None:  # absent: the request already ended here
                inbox.put(_new_tuple(Token, (position, token, now)))

    async def _run(self) -> None:
        while True:
            try:
                reason = await self.connect(self)
            finally:
                self.open = False
            self._fail_all(reason)
            await asyncio.sleep(REOPEN_S)

    def _fail_all(self, reason: str) -> None:
        routes, self.routes = self.routes, {}
        for inbox in routes.values():
            inbox.put(RoleError(ErrorKind.FAILED, f"token feed from {self.service} broke ({reason})"))


def grpc_feed(stub: pb_grpc.DecodeStub) -> FeedConnect:
    """The feed as the `Tokens` gRPC stream, or pushed where the stub can (a simulation's: services/simulate/feedport.py)."""
    async def connect(feed: TokenFeed) -> str:
        request = pb.TokensRequest(subscriber=SUBSCRIBER)
        open_tokens = getattr(stub, "open_tokens", None)
        if open_tokens is not None:  # a simulation's stub hands each step over as the feed port does
            pushed = open_tokens(request, feed.deliver)
            return pushed if isinstance(pushed, str) else await pushed.wait()
        call = stub.Tokens(request, wait_for_ready=True)
        try:
            async for message in call:
                feed.deliver(message.request_id, message.position, message.token)
            return "ended"
        except grpc.aio.AioRpcError as exc:
            return exc.details() or exc.code().name
    return connect


def tcp_feed(address: str) -> FeedConnect:
    """The feed on the service's feed port (services/rpc/feed_wire.py)."""
    host, port = address.rsplit(":", 1)

    async def connect(feed: TokenFeed) -> str:
        loop = asyncio.get_running_loop()
        try:
            transport, reader = await asyncio.wait_for(
                loop.create_connection(lambda: FeedReader(feed), host, int(port)), feed_wire.CONNECT_S)
        except (OSError, asyncio.TimeoutError) as exc:
            return f"cannot connect to {address}: {exc or type(exc).__name__}"
        try:
            return await reader.ended
        finally:
            transport.abort()
    return connect


class FeedReader(asyncio.Protocol):
    """Steps parsed as they arrive, in the callback that reads them: no task wakes per message."""

    def __init__(self, feed: TokenFeed) -> None:
        self.feed = feed
        self._loop = asyncio.get_running_loop()
        self.ended: asyncio.Future[str] = self._loop.create_future()
        self._unpacker = feed_wire.unpacker()
        self._heard = False
        self._reason: str | None = None
        self._watch: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        transport.write(feed_wire.hello(SUBSCRIBER))
        self._watch = self._loop.call_later(feed_wire.SILENT_S, self._check)

    def data_received(self, data: bytes) -> None:
        self._heard = True
        deliver, step_of = self.feed.deliver, feed_wire.step_of
        try:
            self._unpacker.feed(data)
            for value in self._unpacker:
                deliver(*step_of(value))
        except (feed_wire.FeedWireError, msgpack.UnpackException, ValueError) as exc:
            self._hang_up(f"bad feed data: {exc}")

    def _check(self) -> None:
        if not self._heard:
            self._hang_up(f"nothing for {feed_wire.SILENT_S:g} s")
            return
        self._heard = False
        self._watch = self._loop.call_later(feed_wire.SILENT_S, self._check)

    def _hang_up(self, reason: str) -> None:
        self._reason = reason
        self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if not self.ended.done():
            self.ended.set_result(self._reason or (f"connection lost: {exc}" if exc else "ended"))


class LazyInbox(EventChannel):
    """One Generate call's items at a simulation's router: its reader wakes for the first token only.

    In a simulation nothing but the reader consumes a token between its first and the call's end,
    and each token carries its arrival time (`Token.t`), so the reader may take the rest in one go
    when the stats or an error wake it: one task wake-up per stream instead of one per token.
    """

    __slots__ = ("_quiet", "_eager")

    def __init__(self) -> None:
        super().__init__()
        self._quiet = False  # past the first token: tokens queue without waking the reader
        self._eager = False  # told to wake the reader for every token after all

    def put(self, item: object) -> None:
        if type(item) is Token and not self._eager:
            if self._quiet:
                self._items.append(item)
                return
            self._quiet = True  # the first token wakes the reader; the rest wait
        super().put(item)

    def wake_for_each_token(self) -> None:
        """Every token wakes the reader from now on: it holds the stats and waits for the last ones."""
        self._eager = True

    def arrived_tokens(self) -> list[Token]:
        """Take the tokens at the head of the queue: what arrived while the reader was not woken for them."""
        items, tokens = self._items, []
        while items and type(items[0]) is Token:
            tokens.append(items.popleft())
        return tokens
