"""Send KV transfers over a small pool of TCP connections to one destination.

The pool is bounded (like a real engine's transfer connection pool): when every
connection is busy, a transfer waits for one, which is where a saturated line
shows up as queueing. Frames of one transfer use one connection so they arrive
in order; `writer.drain()` passes the link's backpressure back to us.

The receiver writes back only acknowledgements, a count of the whole frames it
has read, so a watcher reading them learns what landed and sees a connection end
(a reset link, a restarted receiver). Bytes handed to a broken connection may
have died in flight, and a transfer is never resent, so the transfers sent over
it and not acknowledged are reported to `on_lost`: the shipper tells their
receivers, which fail them now instead of at their deadline.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Callable

from netem.connection import abort_with_reset
from services.kv.frames import ACK, DEFAULT_FRAME_PAYLOAD_BYTES, Completion, frame_count, split_payload

log = logging.getLogger(__name__)
# A stop is seen between slices, and what a stopped transfer has handed over still crosses the line
# unless a reset can drop it (_Connection.cut): the frame's unwritten rest, the transport's buffer and
# the kernel's. A byte-scaled link multiplies those bytes' line time by byte_scale (64 KiB of buffers
# and a 256 KiB frame were 0.26 s of a 10 Gbit/s line at 1000x, taken from the next request's
# transfer), so frames leave in slices and both buffers hold about one slice (docs/mesh.md §Frames).
# The kernel doubles SO_SNDBUF.
SLICE_BYTES = 16 * 1024
SEND_BUFFER_BYTES = 8 * 1024
RECENT_TRANSFERS = 64  # per connection, not yet acknowledged: what a broken connection may have swallowed
# A retired connection's earlier transfers are whole at the receiver by its frame deadline
# (services/kv/receiver.py ReceiverLimits.frame_read_s), unless they were lost.
RETIRED_READ_S = 120.0


class TransferCancelled(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class SendResult:
    request_id: str
    real_bytes: int
    frames: int
    seconds: float
    cancelled: bool = False


@dataclass(eq=False)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    # (request id, frames written on this connection through its last one), until acknowledged
    sent: collections.deque[tuple[str, int]] = field(
        default_factory=lambda: collections.deque(maxlen=RECENT_TRANSFERS))
    frames_written: int = 0
    frames_acked: int = 0
    watcher: asyncio.Task | None = None
    broken: bool = False
    deadline: asyncio.TimerHandle | None = None  # retired: the last wait for the receiver to end it

    def frames_before(self, request_id: str) -> int:
        """Frames written on this connection before the transfer's first; its earlier parts are its own."""
        earlier = [end for rid, end in self.sent if rid != request_id]
        return earlier[-1] if earlier else 0

    def acknowledge(self, frames: int) -> None:
        self.frames_acked = frames
        while self.sent and self.sent[0][1] <= frames:
            self.sent.popleft()

    def close(self) -> None:
        self.writer.close()

    def retire(self) -> None:
        """Stop writing after what is buffered, and go on reading the receiver's counts until it ends
        the connection: closed outright, the socket would answer the counts still coming with a
        reset, and the reset drops the earlier transfers' bytes wherever they wait. The receiver
        drops the cut frame at the end of the stream, and the watcher reports whatever is still
        unacknowledged then, or at RETIRED_READ_S (docs/mesh.md §Frames)."""
        if self.writer.can_write_eof():
            self.writer.write_eof()
        self.deadline = asyncio.get_running_loop().call_later(RETIRED_READ_S, self.writer.close)

    def cut(self) -> None:
        """Reset: a stopped transfer alone in flight, its bytes dropped wherever they wait (buffers, a
        link's queue), as the simulation's link forgets a closed connection's queue."""
        if self.watcher is not None:
            self.watcher.cancel()
        abort_with_reset(self.writer.transport)

    def shut(self) -> None:
        """Close at once, reporting nothing: the sender is shutting down."""
        if self.watcher is not None:
            self.watcher.cancel()
        if self.deadline is not None:
            self.deadline.cancel()
        self.writer.close()


class KvSender:
    def __init__(self, host: str, port: int, connections: int = 4, connect_timeout_s: float = 10.0,
                 on_lost: Callable[[list[str]], None] | None = None) -> None:
        self.host, self.port = host, port
        self.connect_timeout_s = connect_timeout_s
        self.on_lost = on_lost
        self._idle: asyncio.Queue[_Connection | None] = asyncio.Queue()
        for _ in range(connections):
            self._idle.put_nowait(None)  # opened lazily, reopened after a failure
        self._open: set[_Connection] = set()
        self.bytes_sent = 0
        self.transfers = 0
        self.failures = 0

    async def _connect(self) -> _Connection:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self.connect_timeout_s)
        # A small send buffer keeps bytes in our hands, not the kernel's, so a cancelled transfer
        # stops flowing at once and drain() reflects the link's backpressure (docs/mesh.md §Frames).
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        writer.transport.set_write_buffer_limits(high=SLICE_BYTES)
        conn = _Connection(reader, writer)
        conn.watcher = asyncio.create_task(self._watch(conn), name=f"kv-watch-{self.host}:{self.port}")
        self._open.add(conn)
        return conn

    async def _watch(self, conn: _Connection) -> None:
        """Read acknowledgements until the connection ends, then report what it may have lost."""
        try:
            while True:
                conn.acknowledge(ACK.unpack(await conn.reader.readexactly(ACK.size))[0])
        except (OSError, asyncio.IncompleteReadError):
            pass
        conn.broken = True
        self._open.discard(conn)
        if conn.deadline is not None:  # retired: the receiver ended it, or the deadline did
            conn.deadline.cancel()
            conn.close()
        lost = [request_id for request_id, _ in conn.sent]
        conn.sent.clear()
        if lost and self.on_lost is not None:
            self.on_lost(lost)

    async def send(self, request_id: str, real_bytes: int, cancel: asyncio.Event | None = None,
                   frame_bytes: int = DEFAULT_FRAME_PAYLOAD_BYTES, seqs: range | None = None,
                   completion: Completion | None = None) -> SendResult:
        """Send the transfer's frames, or those numbered `seqs` (a streamed part), the last one with
        `completion`; a transfer is counted once its last frame is sent."""
        frames = split_payload(request_id, real_bytes, frame_bytes, seqs, completion)
        last = frame_count(real_bytes, frame_bytes) - 1
        conn = await self._idle.get()
        started = time.monotonic()
        sent = 0
        clean = False  # a connection left mid-frame must not be reused
        try:
            if conn is not None and (conn.broken or conn.writer.is_closing()):
                # It ended while idle: frames written into it would vanish without an error.
                conn.close()
                conn = None
            if conn is None:
                conn = await self._connect()
            writer = conn.writer
            frames_before = conn.frames_before(request_id)
            for frame in frames:
                stopped = cancel is not None and cancel.is_set()
                if stopped or not await self._write_frame(writer, frame.encode(), cancel):
                    # Bytes stop flowing; the receiver counts frames of a cancelled transfer as orphans.
                    conn, clean = self._after_stop(conn, frames_before, mid_frame=not stopped), True
                    return SendResult(request_id, sent, len(frames), time.monotonic() - started, True)
                conn.frames_written += 1
                sent += len(frame.data)
                self.bytes_sent += len(frame.data)
            if frames and frames[-1].seq == last:
                self.transfers += 1
            if conn.sent and conn.sent[-1][0] == request_id:  # a streamed transfer's parts: listed once
                conn.sent.pop()
            conn.sent.append((request_id, conn.frames_written))
            clean = True
            return SendResult(request_id, sent, len(frames), time.monotonic() - started)
        except (OSError, asyncio.TimeoutError) as exc:
            self.failures += 1
            raise ConnectionError(f"KV transfer of {request_id} to {self.host}:{self.port} failed: {exc}") from exc
        finally:
            if not clean and conn is not None:
                conn.close()  # its watcher reports the earlier transfers it carried
                conn = None
            self._idle.put_nowait(conn)

    def _after_stop(self, conn: _Connection, frames_before: int, mid_frame: bool) -> _Connection | None:
        """The connection a stopped transfer leaves to the next, None if it is given up.

        Cut mid-frame, the stream cannot go on: the connection is not reused, as the simulation's
        link closes it. Stopped between frames it can, unless only the transfer's own bytes are in
        flight, which a reset then drops (_Connection.cut). Earlier transfers' bytes in flight must
        land, so a connection that still carries them is retired, never reset."""
        earlier_in_flight = conn.frames_acked < frames_before
        if not mid_frame and (conn.frames_acked >= conn.frames_written or earlier_in_flight):
            return conn  # nothing in flight, or an earlier transfer's bytes that must land
        if earlier_in_flight:
            log.info("retiring a KV connection to %s:%d: %d earlier frames still unacknowledged",
                     self.host, self.port, frames_before - conn.frames_acked)
            conn.retire()  # stays open, and watched, until the receiver ends it
        else:
            self._open.discard(conn)
            conn.cut()
        return None

    @staticmethod
    async def _write_frame(writer: asyncio.StreamWriter, data: bytes, cancel: asyncio.Event | None) -> bool:
        """Write one encoded frame a slice at a time; False if `cancel` was set before its last slice."""
        view = memoryview(data)
        for start in range(0, len(view), SLICE_BYTES):
            if start and cancel is not None and cancel.is_set():
                return False
            writer.write(view[start:start + SLICE_BYTES])
            await writer.drain()
        return True

    async def close(self) -> None:
        watchers = [c.watcher for c in self._open if c.watcher is not None]
        for conn in list(self._open):
            conn.shut()
        self._open.clear()
        await asyncio.gather(*watchers, return_exceptions=True)
