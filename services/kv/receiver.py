"""Receive KV transfers: bytes over a data-plane TCP link, their figures with the last frame.

A transfer is complete when every frame has arrived intact and its figures and
first token are known: from the last frame's completion (or from a gRPC announce,
which the mesh now sends only to fail a transfer whose bytes will not come). Its
time is measured from prefill's end to the last frame, so a streamed transfer
counts only the part its overlap with prefill did not hide (docs/mesh.md
§Transfer time). Either a frame or the decode request may arrive first, so an
entry is created by whichever comes first and expires at its deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from services.kv.frames import ACK, Completion, FrameError, read_body, read_header

log = logging.getLogger(__name__)


class TransferFailed(RuntimeError):
    pass


@dataclass
class Transfer:
    request_id: str
    created: float
    frames: int = -1  # unknown until a frame (its `of`) or an announce says
    real_bytes: int = 0
    emulated_bytes: int = 0
    first_token: int = -1
    first_token_pending: bool = False  # streamed: frames may land before prefill produced the first token
    num_tokens: int = 0
    received_frames: set[int] = field(default_factory=set)
    received_bytes: int = 0
    announced_at: float = 0.0  # prefill's end: the announce with the first token, or the last frame's stamp
    completed_in_band: bool = False  # the first token came with the last frame
    sized: bool = False  # frames and bytes are known: from the last frame's completion, or an announce
    finished_at: float = 0.0
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    @property
    def seconds(self) -> float:
        return self.finished_at - self.announced_at


ACK_BACKLOG_BYTES = 4096  # acknowledgements a peer has not read; past it, the next are skipped
ENDED_KEPT = 4096  # assumed: more requests than a decode process ends within a transfer deadline


class TransferTable:
    def __init__(self) -> None:
        self._transfers: dict[str, Transfer] = {}
        # Requests whose wait is over here. A late announce of one (a retry's first attempt unwinding,
        # an abort crossing after main decode gave up) would open a transfer nobody awaits.
        self._ended: OrderedDict[str, None] = OrderedDict()
        self.late_announces = 0  # announces of such requests: acknowledged, their frames counted as orphans
        self.completed = 0
        self.failed = 0
        self.orphan_frames = 0
        self.bytes_received = 0

    def entry(self, request_id: str) -> Transfer:
        transfer = self._transfers.get(request_id)
        if transfer is None:
            transfer = self._transfers[request_id] = Transfer(request_id, time.monotonic())
        return transfer

    def announce(self, request_id: str, frames: int, real_bytes: int, emulated_bytes: int,
                 first_token: int, num_tokens: int, first_token_pending: bool = False) -> Transfer | None:
        """A streamed transfer is announced before prefill (first token pending) and completed by its
        last frame (on_frame); one sent after prefill is announced with its first token.

        None for a request whose wait here is over: the sender's other receivers (a relay serving
        the request on) are not failed for it, and its frames land as orphans.
        """
        if request_id in self._ended:
            self.late_announces += 1
            return None
        transfer = self.entry(request_id)
        transfer.frames, transfer.real_bytes, transfer.emulated_bytes = frames, real_bytes, emulated_bytes
        transfer.num_tokens, transfer.sized = num_tokens, True
        if not (first_token_pending and transfer.completed_in_band):  # the last frame overtook it
            transfer.first_token, transfer.first_token_pending = first_token, first_token_pending
        if not first_token_pending:
            transfer.announced_at = time.time()
        self._complete_if_whole(transfer)
        return transfer

    def on_frame(self, request_id: str, seq: int, of: int, size: int, completion: Completion | None = None) -> None:
        """A frame's figures; a transfer's last one brings its completion: first token, prefill's end, sizes."""
        transfer = self._transfers.get(request_id)
        if transfer is None and request_id not in self._ended:
            transfer = self.entry(request_id)  # its bytes came before its decode request did
        if transfer is None or transfer.done.done():
            self.orphan_frames += 1  # a cancelled or expired transfer: counted, never silently dropped
            return
        if transfer.frames == -1:
            transfer.frames = of
        elif transfer.frames != of:
            self.fail(request_id, f"frame count {of} disagrees with the transfer's {transfer.frames}")
            return
        transfer.received_frames.add(seq)
        transfer.received_bytes += size
        self.bytes_received += size
        if completion is not None and not transfer.completed_in_band:
            transfer.first_token, transfer.first_token_pending = completion.first_token, False
            transfer.announced_at, transfer.completed_in_band = completion.prefill_done_unix, True
            if completion.has_figures:
                transfer.num_tokens, transfer.real_bytes = completion.num_tokens, completion.real_bytes
                transfer.emulated_bytes, transfer.sized = completion.emulated_bytes, True
        self._complete_if_whole(transfer)

    def _complete_if_whole(self, transfer: Transfer) -> None:
        if not transfer.sized or len(transfer.received_frames) < transfer.frames or transfer.done.done() \
                or transfer.first_token_pending:
            return
        if transfer.received_bytes != transfer.real_bytes:
            self.fail(transfer.request_id, f"received {transfer.received_bytes} bytes of its {transfer.real_bytes}")
            return
        transfer.finished_at = time.time()
        self.completed += 1
        transfer.done.set_result(None)  # not the transfer: a future holding its owner is a reference cycle

    def fail(self, request_id: str, reason: str) -> None:
        transfer = self._transfers.get(request_id)
        if transfer is not None and not transfer.done.done():
            self.failed += 1
            transfer.done.set_exception(TransferFailed(f"KV transfer of {request_id} failed: {reason}"))
            # Marked as read: a waiter that timed out (wait, below) has gone, and the waiters still
            # there raise it all the same; unread, asyncio would log it as never retrieved.
            transfer.done.exception()

    def discard(self, request_id: str) -> None:
        transfer = self._transfers.pop(request_id, None)
        if transfer is not None and not transfer.done.done():
            transfer.done.cancel()
        self._ended[request_id] = None
        if len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)


    async def wait(self, request_id: str, timeout_s: float) -> Transfer:
        transfer = self.entry(request_id)
        try:
            await asyncio.wait_for(asyncio.shield(transfer.done), timeout_s)
            return transfer
        except asyncio.TimeoutError:
            self.fail(request_id, f"not complete within {timeout_s:g} s")
            raise TransferFailed(f"KV transfer of {request_id} not complete within {timeout_s:g} s") from None

    @property
    def pending(self) -> int:
        return sum(1 for t in self._transfers.values() if not t.done.done())


@dataclass(frozen=True)
class ReceiverLimits:
    """What one peer may hold at a KV receiver (docs/mesh.md §Frames)."""

    frame_read_s: float = 120.0  # a frame begun must be whole by then (the mesh: its transfer deadline)
    idle_s: float = 300.0  # a connection silent this long between frames is closed; the sender reopens
    frame_bytes: int = 1 << 20  # per connection: one frame at a time, at most this (the sender's are 256 KiB)
    buffer_bytes: int = 32 << 20  # in total: frame bodies are read only within this budget
    max_connections: int = 64

    def __post_init__(self) -> None:
        if self.frame_bytes > self.buffer_bytes:
            raise ValueError(f"a frame of {self.frame_bytes} bytes could never fit the {self.buffer_bytes}-byte budget")


class KvReceiver:
    """A TCP server that reads KV frames into a TransferTable, within ReceiverLimits."""

    def __init__(self, table: TransferTable, host: str, port: int, limits: ReceiverLimits = ReceiverLimits()) -> None:
        self.table, self.host, self.port, self.limits = table, host, port, limits
        self._server: asyncio.Server | None = None
        self._budget = asyncio.Condition()
        self.buffered_bytes = 0  # reserved by frame bodies being read now
        self.connections = 0
        self.refused_connections = 0
        self.bad_frames = 0

    async def start(self) -> None:
        # A small stream buffer: bytes beyond it wait in the kernel until a frame's budget is reserved.
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=64 * 1024)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _reserve(self, size: int) -> None:
        async with self._budget:
            await self._budget.wait_for(lambda: self.buffered_bytes + size <= self.limits.buffer_bytes)
            self.buffered_bytes += size

    async def _release(self, size: int) -> None:
        async with self._budget:
            self.buffered_bytes -= size
            self._budget.notify_all()

    async def _next_frame(self, reader: asyncio.StreamReader) -> tuple[str, int, int, int, Completion | None] | None:
        """(request id, seq, of, payload size, completion) of the next frame, None at a clean end;
        TimeoutError when idle or a frame takes too long. Only the figures are kept: the payload is
        freed with its budget."""
        async with asyncio.timeout(self.limits.idle_s):
            length = await read_header(reader, self.limits.frame_bytes)
        if length is None:
            return None
        async with asyncio.timeout(self.limits.frame_read_s):
            await self._reserve(length)
            try:
                frame = await read_body(reader, length)
                return frame.request_id, frame.seq, frame.of, len(frame.data), frame.completion
            finally:
                await self._release(length)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= self.limits.max_connections:
            self.refused_connections += 1
            log.warning("refusing a KV connection: %d open, the limit", self.connections)
            writer.close()
            return
        self.connections += 1
        frames = 0
        try:
            while (frame := await self._next_frame(reader)) is not None:
                self.table.on_frame(*frame)
                frames += 1
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
            self.connections -= 1
            writer.close()

    def stats(self) -> dict:
        return {"kv_connections": self.connections, "kv_connections_refused": self.refused_connections,
                "kv_buffered_bytes": self.buffered_bytes}
