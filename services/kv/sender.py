"""Send KV transfers over a small pool of TCP connections to one destination.

The pool is bounded (like a real engine's transfer connection pool): when every
connection is busy, a transfer waits for one, which is where a saturated line
shows up as queueing. Frames of one transfer use one connection so they arrive
in order; `writer.drain()` passes the link's backpressure back to us.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass

from services.kv.frames import DEFAULT_FRAME_PAYLOAD_BYTES, split_payload

log = logging.getLogger(__name__)
SEND_BUFFER_BYTES = 64 * 1024


class TransferCancelled(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class SendResult:
    request_id: str
    real_bytes: int
    frames: int
    seconds: float
    cancelled: bool = False


class KvSender:
    def __init__(self, host: str, port: int, connections: int = 4, connect_timeout_s: float = 10.0) -> None:
        self.host, self.port = host, port
        self.connect_timeout_s = connect_timeout_s
        self._idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter] | None] = asyncio.Queue()
        for _ in range(connections):
            self._idle.put_nowait(None)  # opened lazily, reopened after a failure
        self.bytes_sent = 0
        self.transfers = 0
        self.failures = 0

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self.connect_timeout_s)
        # A small send buffer keeps bytes in our hands, not the kernel's, so a cancelled transfer
        # stops flowing at once and drain() reflects the link's backpressure (docs/mesh.md §Frames).
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        return reader, writer

    async def send(self, request_id: str, real_bytes: int, cancel: asyncio.Event | None = None,
                   frame_bytes: int = DEFAULT_FRAME_PAYLOAD_BYTES) -> SendResult:
        frames = split_payload(request_id, real_bytes, frame_bytes)
        conn = await self._idle.get()
        started = time.monotonic()
        sent = 0
        clean = False  # a connection left mid-frame must not be reused
        try:
            if conn is None:
                conn = await self._connect()
            writer = conn[1]
            for frame in frames:
                if cancel is not None and cancel.is_set():
                    # Bytes stop flowing; the receiver counts frames of a cancelled transfer as orphans.
                    clean = True
                    return SendResult(request_id, sent, len(frames), time.monotonic() - started, True)
                writer.write(frame.encode())
                await writer.drain()
                sent += len(frame.data)
                self.bytes_sent += len(frame.data)
            self.transfers += 1
            clean = True
            return SendResult(request_id, sent, len(frames), time.monotonic() - started)
        except (OSError, asyncio.TimeoutError) as exc:
            self.failures += 1
            raise ConnectionError(f"KV transfer of {request_id} to {self.host}:{self.port} failed: {exc}") from exc
        finally:
            if not clean and conn is not None:
                conn[1].close()
                conn = None
            self._idle.put_nowait(conn)

    async def close(self) -> None:
        while not self._idle.empty():
            conn = self._idle.get_nowait()
            if conn is not None:
                conn[1].close()
