"""A decode service's token feeds on a TCP port of their own (services/rpc/feed_wire.py).

One connection is one subscriber's feed: it names itself, the service opens its feed
in the FeedTable (closing an older one of the same name), and from then on every
batch the feed sends is written as one msgpack value, in the callback that ends the
loop pass which put it: no task wakes for it. Protocol callbacks rather than streams,
because the point of the port is to spend nothing per message beyond the write.

Every wait has a deadline: a subscriber names itself within HELLO_S; a feed that has
sent nothing for HEARTBEAT_S sends an empty step; a subscriber that leaves the
connection's buffer full for STALLED_S is cut off, which closes its feed and fails the
calls still writing to it (services/main_decode/feed.py `Route`).
"""

from __future__ import annotations

import asyncio
import logging

import msgpack

from services.main_decode.feed import Batch, Feed, FeedTable
from services.rpc import feed_wire

log = logging.getLogger(__name__)


class FeedConnection(asyncio.Protocol):
    def __init__(self, feeds: FeedTable, open_connections: set, heartbeat_s: float = feed_wire.HEARTBEAT_S) -> None:
        self.feeds, self.open_connections, self.heartbeat_s = feeds, open_connections, heartbeat_s
        self.feed: Feed | None = None
        self.transport: asyncio.Transport | None = None
        self._unpacker = feed_wire.unpacker()
        self._sent = False  # a step since the last heartbeat tick
        self._timer: asyncio.TimerHandle | None = None
        self._stall: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.open_connections.add(self)
        self._timer = self._loop.call_later(feed_wire.HELLO_S, self._no_hello)

    def data_received(self, data: bytes) -> None:
        if self.feed is not None:
            return  # a subscriber sends only its hello
        try:
            self._unpacker.feed(data)
            value = next(self._unpacker, None)
            if value is None:
                return
            subscriber = feed_wire.subscriber_of(value)
        except (feed_wire.FeedWireError, msgpack.UnpackException, ValueError) as exc:
            log.warning("feed connection from %s: %s", self.transport.get_extra_info("peername"), exc)
            self.transport.abort()
            return
        self._timer.cancel()
        self.feed = self.feeds.open(subscriber, self._send)
        self.transport.write(feed_wire.EMPTY_STEP)  # the feed is open
        self._timer = self._loop.call_later(self.heartbeat_s, self._heartbeat)

    def _send(self, batch: Batch) -> None:
        self._sent = True
        self.transport.write(feed_wire.step(*batch))

    def _heartbeat(self) -> None:
        if not self._sent:
            self.transport.write(feed_wire.EMPTY_STEP)
        self._sent = False
        self._timer = self._loop.call_later(self.heartbeat_s, self._heartbeat)

    def _no_hello(self) -> None:
        log.warning("feed connection from %s named no subscriber within %.0f s",
                    self.transport.get_extra_info("peername"), feed_wire.HELLO_S)
        self.transport.abort()

    def pause_writing(self) -> None:
        self._stall = self._loop.call_later(feed_wire.STALLED_S, self._stalled)

    def resume_writing(self) -> None:
        if self._stall is not None:
            self._stall.cancel()

    def _stalled(self) -> None:
        log.warning("token feed of %s read nothing for %.0f s; closing it", self.feed.subscriber, feed_wire.STALLED_S)
        self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.open_connections.discard(self)
        for timer in (self._timer, self._stall):
            if timer is not None:
                timer.cancel()
        if self.feed is not None:
            self.feeds.close(self.feed)


class FeedServer:
    def __init__(self, feeds: FeedTable, host: str, port: int, heartbeat_s: float = feed_wire.HEARTBEAT_S) -> None:
        self.feeds, self.host, self.port, self.heartbeat_s = feeds, host, port, heartbeat_s
        self.connections: set[FeedConnection] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: FeedConnection(self.feeds, self.connections, self.heartbeat_s),
                                                self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]  # the one bound, where `port` was 0

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for connection in list(self.connections):
                connection.transport.abort()  # its loss closes its feed
            await self._server.wait_closed()
