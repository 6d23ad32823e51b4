"""Receive KV transfers: announced over gRPC, bytes over a data-plane TCP link.

A transfer is complete when every announced frame has arrived intact; its
time is measured from the announce to the last frame (docs/mesh.md §Transfer
time). Either the announce or the decode request may arrive first, so an entry
is created by whichever comes first and expires at its deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from services.kv.frames import FrameError, read_frame

log = logging.getLogger(__name__)


class TransferFailed(RuntimeError):
    pass


@dataclass
class Transfer:
    request_id: str
    created: float
    frames: int = -1  # unknown until announced
    real_bytes: int = 0
    emulated_bytes: int = 0
    first_token: int = -1
    num_tokens: int = 0
    received_frames: set[int] = field(default_factory=set)
    received_bytes: int = 0
    announced_at: float = 0.0
    finished_at: float = 0.0
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    @property
    def seconds(self) -> float:
        return self.finished_at - self.announced_at


class TransferTable:
    def __init__(self) -> None:
        self._transfers: dict[str, Transfer] = {}
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
                 first_token: int, num_tokens: int) -> Transfer:
        transfer = self.entry(request_id)
        transfer.frames, transfer.real_bytes, transfer.emulated_bytes = frames, real_bytes, emulated_bytes
        transfer.first_token, transfer.num_tokens = first_token, num_tokens
        transfer.announced_at = time.time()
        self._complete_if_whole(transfer)
        return transfer

    def on_frame(self, request_id: str, seq: int, of: int, size: int) -> None:
        transfer = self._transfers.get(request_id)
        if transfer is None or transfer.done.done():
            self.orphan_frames += 1  # a cancelled or expired transfer: counted, never silently dropped
            return
        if transfer.frames not in (-1, of):
            self.fail(request_id, f"frame count {of} disagrees with the announced {transfer.frames}")
            return
        transfer.received_frames.add(seq)
        transfer.received_bytes += size
        self.bytes_received += size
        self._complete_if_whole(transfer)

    def _complete_if_whole(self, transfer: Transfer) -> None:
        if transfer.frames < 0 or len(transfer.received_frames) < transfer.frames or transfer.done.done():
            return
        if transfer.received_bytes != transfer.real_bytes:
            self.fail(transfer.request_id, f"received {transfer.received_bytes} bytes, announced {transfer.real_bytes}")
            return
        transfer.finished_at = time.time()
        self.completed += 1
        transfer.done.set_result(transfer)

    def fail(self, request_id: str, reason: str) -> None:
        transfer = self._transfers.get(request_id)
        if transfer is not None and not transfer.done.done():
            self.failed += 1
            transfer.done.set_exception(TransferFailed(f"KV transfer of {request_id} failed: {reason}"))

    def discard(self, request_id: str) -> None:
        transfer = self._transfers.pop(request_id, None)
        if transfer is not None and not transfer.done.done():
            transfer.done.cancel()

    async def wait(self, request_id: str, timeout_s: float) -> Transfer:
        transfer = self.entry(request_id)
        try:
            return await asyncio.wait_for(asyncio.shield(transfer.done), timeout_s)
        except asyncio.TimeoutError:
            self.fail(request_id, f"not complete within {timeout_s:g} s")
            raise TransferFailed(f"KV transfer of {request_id} not complete within {timeout_s:g} s") from None

    @property
    def pending(self) -> int:
        return sum(1 for t in self._transfers.values() if not t.done.done())


class KvReceiver:
    """A TCP server that reads KV frames into a TransferTable."""

    def __init__(self, table: TransferTable, host: str, port: int) -> None:
        self.table, self.host, self.port = table, host, port
        self._server: asyncio.Server | None = None
        self.bad_frames = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=2**20)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (frame := await read_frame(reader)) is not None:
                self.table.on_frame(frame.request_id, frame.seq, frame.of, len(frame.data))
        except FrameError as exc:
            self.bad_frames += 1
            log.warning("closing KV connection: %s", exc)
            if exc.request_id:
                self.table.fail(exc.request_id, str(exc))
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("KV connection ended: %s", exc)
        finally:
            writer.close()
