"""One proxied TCP connection: two endpoints and the two flows between them.

The client endpoint feeds the `up` flow and is written by the `down` flow; the
upstream endpoint the reverse. Endpoints are asyncio BufferedProtocols reading
into large buffers: a full buffer is handed to the flow without a copy and a
fresh one taken, a small read is copied out so its buffer can be reused.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import TYPE_CHECKING, cast

from netem.config import DirectionConfig
from netem.direction import QUEUE_PIECES
from netem.flow import Flow

if TYPE_CHECKING:
    from netem.link import UserspaceLink

READ_BYTES = 1 << 20
# On a shaped direction the kernel's receive buffer would otherwise autotune to megabytes and
# hold the sender's bytes outside the link's bounded queue: the sender would finish "sending"
# (and could no longer cancel) long before the line carried the bytes. docs/netem.md §Backpressure.
MIN_SHAPED_RCVBUF = 16 * 1024
MAX_SHAPED_RCVBUF = 4 * 1024 * 1024
# A receive window under a few segments stalls: Linux's receiver-side silly-window avoidance keeps
# advertising zero until a whole segment's space is free, so a paused-and-resumed sender can wait
# for its persist timer (200 ms or more) to probe the window open. Loopback's segment is 32 KiB,
# so a 64 KiB queue's 32 KiB buffer stalled KV transfers by 50-375 ms (docs/netem.md §Backpressure).
# A link's listener announces a smaller segment where the queue is small (announced_segment); the
# buffer floor covers the sockets whose segment it does not choose (its own connections upstream).
MIN_SEGMENTS_IN_RCVBUF = 4
MIN_ANNOUNCED_SEGMENT = 1024
LOOPBACK_SEGMENT = 32 * 1024  # what Linux announces on lo (MTU 65536) unless told a smaller one
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, timeout 0: close() sends RST


def abort_with_reset(transport: asyncio.BaseTransport) -> None:
    """Close `transport` with a TCP reset (SO_LINGER 0): the peer sees RST, and what is buffered is dropped."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        except OSError:
            pass  # already gone; abort() below still closes it
    transport.abort()


def announced_segment(config: DirectionConfig) -> int | None:
    """The TCP segment a link's listener announces for a shaped direction whose queue is small.

    Half the queue must hold MIN_SEGMENTS_IN_RCVBUF segments, or the window stalls (above); a
    smaller segment keeps the receive buffer at half the queue, so a stopped sender has no more
    bytes in flight than the queue implies. None: loopback's own segment already fits.
    """
    if not config.rate_bps:
        return None
    segment = max(config.queue_bytes // 2 // MIN_SEGMENTS_IN_RCVBUF, MIN_ANNOUNCED_SEGMENT)
    return segment if segment < LOOPBACK_SEGMENT else None


def shaped_rcvbuf(queue_bytes: int, sock: socket.socket, segment: int | None = None) -> int:
    """SO_RCVBUF of a shaped direction's socket: half the queue, but room for a few of its segments.

    `segment`: the one a listening socket's connections will have; a connected socket says its own.
    """
    if segment is None:
        try:
            segment = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        except OSError:  # not TCP (a test's socketpair): no segment to make room for
            segment = 0
    size = max(queue_bytes // 2, MIN_SHAPED_RCVBUF, MIN_SEGMENTS_IN_RCVBUF * segment)
    return min(size, MAX_SHAPED_RCVBUF)


class _TurnTaking:
    """A sender's transport as its flow pauses it: a pause waits for the end of the loop pass.

    A full queue bound pauses every connection of the direction, and asyncio's pause cancels a read
    the selector has already reported. Of several connections ready together only the first in the
    selector's order would then read, and one connection would hold the line until it ran dry
    while the others waited (docs/netem.md, "Sharing the line"). Paused at the pass's end, every
    connection ready in it reads once (a quarter of the bound at most, Endpoint.get_buffer), as the
    virtual link wakes each paused message for one piece.
    """

    __slots__ = ("_transport", "_pause")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pause: asyncio.Handle | None = None

    def pause_reading(self) -> None:
        if self._pause is None:
            self._pause = asyncio.get_running_loop().call_soon(self._paused)

    def _paused(self) -> None:
        self._pause = None
        self._transport.pause_reading()  # a no-op on a closing transport

    def resume_reading(self) -> None:
        if self._pause is not None:  # resumed within the pass: it was never paused
            self._pause.cancel()
            self._pause = None
            return
        self._transport.resume_reading()

    def is_closing(self) -> bool:
        return self._transport.is_closing()


class Endpoint(asyncio.BufferedProtocol):
    def __init__(self, conn: Connection, inbound: Flow, outbound: Flow) -> None:
        self.conn = conn
        self.inbound = inbound  # bytes read here enter this flow
        self.outbound = outbound  # this flow writes to our transport
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buffer = bytearray(0)
        self._watched: int | None = None  # the socket's fd in the link's HangupWatch

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        config = self.inbound.direction.config
        sock = self.transport.get_extra_info("socket")
        if config.rate_bps and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, shaped_rcvbuf(config.queue_bytes, sock))
        if sock is not None and self.conn.link.hangups is not None:  # a reset while reading is paused
            self._watched = self.conn.link.hangups.watch(sock, lambda exc: self.conn.endpoint_lost(self, exc))
        self.inbound.source = _TurnTaking(self.transport)
        self.outbound.sink = self.transport
        self.conn.endpoint_ready(self)

    def get_buffer(self, sizehint: int) -> bytearray:
        # At most a quarter of the queue bound a read, as a virtual message enters (netem/virtual.py):
        # connections ready together then share the line read by read (_TurnTaking).
        size = min(READ_BYTES, max(MIN_SHAPED_RCVBUF, self.inbound.direction.config.queue_bytes // QUEUE_PIECES))
        if len(self._buffer) != size:
            self._buffer = bytearray(size)
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        if nbytes * 2 >= len(self._buffer):
            data: bytes | memoryview = memoryview(self._buffer)[:nbytes]
            self._buffer = bytearray(0)  # handed over; the next read gets a new one
        else:
            data = bytes(memoryview(self._buffer)[:nbytes])
        self.inbound.feed(data)

    def eof_received(self) -> bool:
        self.inbound.feed_eof()
        return True  # keep our sending half open until the other way is done

    def pause_writing(self) -> None:
        self.outbound.set_sink_paused(True)

    def resume_writing(self) -> None:
        self.outbound.set_sink_paused(False)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn.link.hangups is not None:
            self.conn.link.hangups.forget(self._watched)  # before the transport closes the socket
        if not self.lost.done():
            self.lost.set_result(None)
        self.conn.endpoint_lost(self, exc)

    def abort(self, reset: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if reset:
            abort_with_reset(self.transport)
        else:
            self.transport.close()


class Connection:
    def __init__(self, link: UserspaceLink) -> None:
        self.link = link
        loop = asyncio.get_running_loop()
        self.up = Flow(link.direction("up"), loop, link.connection_rng("up"), link.timers)
        self.down = Flow(link.direction("down"), loop, link.connection_rng("down"), link.timers)
        self.up.on_eof_delivered = self.down.on_eof_delivered = self._maybe_finish
        self.client = Endpoint(self, inbound=self.up, outbound=self.down)
        self.upstream = Endpoint(self, inbound=self.down, outbound=self.up)
        self.closed = False
        link.register(self)

    def endpoint_ready(self, endpoint: Endpoint) -> None:
        if self.closed:
            endpoint.abort(reset=True)  # the upstream leg came up after the connection was reset
            return
        if endpoint is self.client:
            # Hold the client's bytes until the upstream leg exists.
            endpoint.transport.pause_reading()  # type: ignore[union-attr]
            self.up.reading_paused = True
            if self.link.rejecting():
                self.reset()
                return
            self.link.spawn(self._connect_upstream())
        else:
            self.up.update_reading()
            self.down.update_reading()
            self.up.release()

    async def _connect_upstream(self) -> None:
        host, port = self.link.upstream
        try:
            await asyncio.get_running_loop().create_connection(lambda: self.upstream, host, port)
        except OSError:
            # Upstream refused or unreachable: the client sees its connection reset.
            self.reset()

    def endpoint_lost(self, endpoint: Endpoint, exc: Exception | None) -> None:
        if self.closed:
            return
        # An endpoint we did not close went away: pass the failure on as a reset.
        self.reset()

    def _maybe_finish(self) -> None:
        if self.up.eof_delivered and self.down.eof_delivered:
            self.close(reset=False)

    def reset(self) -> None:
        self.up.direction.counters["resets"] += 1
        self.down.direction.counters["resets"] += 1
        self.close(reset=True)

    async def wait_closed(self) -> None:
        """Until every socket this connection opened is closed."""
        await asyncio.gather(*(e.lost for e in (self.client, self.upstream) if e.transport is not None))

    def close(self, reset: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.up.close()
        self.down.close()
        self.client.abort(reset)
        self.upstream.abort(reset)
        self.link.forget(self)
