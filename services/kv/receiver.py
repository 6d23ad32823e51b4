"""The KV receiver: a TCP server that reads frames into a TransferTable (services/kv/transfers.py).

Every peer is bounded (ReceiverLimits, docs/mesh.md §Frames): a share of the buffer per connection,
deadlines for a silent connection and for a frame begun, and a cap on connections at which the one
that has waited longest for a whole frame gives way to a newcomer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from services.kv.frames import ACK, Completion, FrameError, read_body, read_header
from services.kv.transfers import TransferTable

log = logging.getLogger(__name__)
ACK_BACKLOG_BYTES = 4096  # acknowledgements a peer has not read; past it, the next are skipped


@dataclass(frozen=True)
class ReceiverLimits:
    """What one peer may hold at a KV receiver (docs/mesh.md §Frames).

    Each connection's share of the buffer is buffer_bytes / max_connections, and a frame may be no
    longer than that share, so no set of peers can hold bytes another peer's frame would wait for.
    """

    frame_read_s: float = 120.0  # a frame begun must be whole by then (the mesh: its transfer deadline)
    idle_s: float = 300.0  # a connection silent this long between frames is closed; the sender reopens
    frame_bytes: int = 512 << 10  # per connection: one frame at a time, at most this (the sender's are 256 KiB)
    buffer_bytes: int = 32 << 20  # in total: the connections' shares
    max_connections: int = 64
    # At the connection cap, a new peer closes the connection that has waited longest for a whole frame
    # once that wait is this long: slots held without sending free themselves for peers that send.
    # Assumed: a sender's frame (256 KiB) crosses its link well within it, outside a partition.
    evict_after_s: float = 0.5

    def __post_init__(self) -> None:
        if self.frame_bytes * self.max_connections > self.buffer_bytes:
            raise ValueError(f"{self.max_connections} connections' frames of {self.frame_bytes} bytes would not "
                             f"fit the {self.buffer_bytes}-byte budget: each connection's share is "
                             f"{self.buffer_bytes // self.max_connections} bytes")


class KvReceiver:
    """A TCP server that reads KV frames into a TransferTable, within ReceiverLimits."""

    def __init__(self, table: TransferTable, host: str, port: int, limits: ReceiverLimits = ReceiverLimits()) -> None:
        self.table, self.host, self.port, self.limits = table, host, port, limits
        self._server: asyncio.Server | None = None
        # Each open connection's writer and when it began waiting for its next whole frame.
        self._waiting_since: dict[asyncio.StreamWriter, float] = {}
        self.buffered_bytes = 0  # held by frame bodies being read now, each within its connection's share
        self.refused_connections = 0
        self.evicted_connections = 0
        self.bad_frames = 0

    @property
    def connections(self) -> int:
        return len(self._waiting_since)

    async def start(self) -> None:
        # A small stream buffer: bytes beyond it wait in the kernel until the frame's header is read.
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=64 * 1024)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self.table.close()

    async def _next_frame(self, reader: asyncio.StreamReader) -> tuple[str, int, int, int, Completion | None] | None:
        """(request id, seq, of, payload size, completion) of the next frame, None at a clean end;
        TimeoutError when idle or a frame takes too long. Only the figures are kept: the payload is
        freed with its share."""
        async with asyncio.timeout(self.limits.idle_s):
            length = await read_header(reader, self.limits.frame_bytes)
        if length is None:
            return None
        async with asyncio.timeout(self.limits.frame_read_s):
            self.buffered_bytes += length
            try:
                frame = await read_body(reader, length)
                return frame.request_id, frame.seq, frame.of, len(frame.data), frame.completion
            finally:
                self.buffered_bytes -= length

    async def _admit(self, writer: asyncio.StreamWriter) -> bool:
        """Room for one more connection. At the cap, the connection that has waited longest for a whole
        frame gives way once that wait reaches evict_after_s; a newcomer waits that long at most."""
        deadline = time.monotonic() + self.limits.evict_after_s
        while self.connections >= self.limits.max_connections:
            stalled, since = min(self._waiting_since.items(), key=lambda item: item[1])
            now = time.monotonic()
            if now - since >= self.limits.evict_after_s:
                self.evicted_connections += 1
                log.warning("closing a KV connection that waited %.1f s for a whole frame: %d open, the limit",
                            now - since, self.connections)
                del self._waiting_since[stalled]
                stalled.transport.abort()
            elif now >= deadline:
                return False
            else:
                await asyncio.sleep(min(deadline, since + self.limits.evict_after_s) - now)
        self._waiting_since[writer] = time.monotonic()
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not await self._admit(writer):
            self.refused_connections += 1
            log.warning("refusing a KV connection: %d open, the limit, each with a frame under way", self.connections)
            writer.close()
            return
        frames = 0
        try:
            while (frame := await self._next_frame(reader)) is not None:
                self.table.on_frame(*frame)
                frames += 1
                if writer in self._waiting_since:  # not evicted meanwhile
                    self._waiting_since[writer] = time.monotonic()
                # Counts are cumulative, so one a peer leaves unread (or has gone) can be skipped: never
                # waited on, and never written into a transport a reset has closed.
                if not writer.is_closing() and writer.transport.get_write_buffer_size() < ACK_BACKLOG_BYTES:
                    writer.write(ACK.pack(frames))
        except FrameError as exc:
            self.bad_frames += 1
            log.warning("closing KV connection: %s", exc)
            if exc.request_id:
                self.table.fail(exc.request_id, str(exc))
        except TimeoutError:
            log.info("closing a KV connection: idle past %g s or a frame slower than %g s",
                     self.limits.idle_s, self.limits.frame_read_s)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("KV connection ended: %s", exc)
        finally:
            self._waiting_since.pop(writer, None)
            writer.close()

    def stats(self) -> dict:
        return {"kv_connections": self.connections, "kv_connections_refused": self.refused_connections,
                "kv_connections_evicted": self.evicted_connections, "kv_buffered_bytes": self.buffered_bytes}
