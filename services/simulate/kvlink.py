"""The KV data plane on a virtual link: the mesh's frames counted, timed by netem/virtual.py, never moved.

In the mesh a transfer of `real_bytes` (emulated bytes / byte_scale) leaves as
256 KiB msgpack frames over one connection of a four-connection pool, through
the planned link, into the receiver's TransferTable. Here the same pool takes
the same frames' wire size (header, msgpack map, payload) to a `VirtualLink`
built from the same link config, and when the last byte would land the frames
are handed to the receiver's table as its socket reader hands them
(docs/simulate.md, "The KV data plane"). A streamed transfer comes as parts
(frame ranges, services/kv/stream.py), each timed and handed over the same way.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from netem.virtual import VirtualConnection, VirtualLink
from services.kv.frames import DEFAULT_FRAME_PAYLOAD_BYTES, HEADER, Completion, frame_count
from services.kv.transfers import TransferTable
from services.kv.sender import SendResult

KV_DIRECTION = "up"  # the sender connects to the link's listening side: its bytes travel up
_MAP_KEYS = sum(1 + len(key) for key in ("v", "rid", "seq", "of", "crc", "data"))  # fixstr keys


def _uint_bytes(n: int) -> int:
    return 1 if n < 128 else 2 if n < 256 else 3 if n < 65536 else 5 if n < 2**32 else 9


def _int_bytes(n: int) -> int:
    return 1 if -32 <= n < 128 else _uint_bytes(n)


def _str_bytes(text: str) -> int:
    n = len(text.encode())
    return n + (1 if n < 32 else 2 if n < 256 else 3 if n < 65536 else 5)


def _bin_bytes(n: int) -> int:
    return n + (2 if n < 256 else 3 if n < 65536 else 5)


def frame_sizes(real_bytes: int, frame_bytes: int = DEFAULT_FRAME_PAYLOAD_BYTES,
                seqs: range | None = None) -> list[int]:
    """Payload bytes of each frame of a transfer (or of those numbered `seqs`), as services/kv/frames.py
    splits it (at least one frame)."""
    seqs = range(frame_count(real_bytes, frame_bytes)) if seqs is None else seqs
    return [min(frame_bytes, real_bytes - seq * frame_bytes) for seq in seqs]


def frame_wire_bytes(request_id: str, seq: int, of: int, size: int, completion: Completion | None = None) -> int:
    """Bytes one encoded frame puts on the wire (KvFrame.encode); the CRC as a full uint32."""
    body = 1 + _MAP_KEYS + 1 + _str_bytes(request_id) + _uint_bytes(seq) + _uint_bytes(of) + 5 + _bin_bytes(size)
    if completion is not None:  # "ft": the token as an int, "t": a float64
        body += 3 + _int_bytes(completion.first_token) + 2 + 9
        if completion.has_figures:  # "n", "eb", "rb": uints
            body += 2 + _uint_bytes(completion.num_tokens) + 3 + _uint_bytes(completion.emulated_bytes) \
                + 3 + _uint_bytes(completion.real_bytes)
    return HEADER.size + body


class VirtualKvSender:
    """KvSender's interface over a VirtualLink: a bounded connection pool, one transfer per connection."""

    def __init__(self, link: VirtualLink, table: TransferTable, connections: int = 4,
                 on_lost: Callable[[list[str]], None] | None = None) -> None:
        self.link, self.table, self.on_lost = link, table, on_lost
        self._idle: asyncio.Queue[VirtualConnection | None] = asyncio.Queue()
        for _ in range(connections):
            self._idle.put_nowait(None)  # opened on first use, reopened after a reset, as KvSender does
        self.bytes_sent = 0
        self.transfers = 0
        self.failures = 0

    async def send(self, request_id: str, real_bytes: int, cancel: asyncio.Event | None = None,
                   frame_bytes: int = DEFAULT_FRAME_PAYLOAD_BYTES, seqs: range | None = None,
                   completion: Completion | None = None) -> SendResult:
        of = frame_count(real_bytes, frame_bytes)
        seqs = range(of) if seqs is None else seqs
        sizes = dict(zip(seqs, frame_sizes(real_bytes, frame_bytes, seqs)))
        wire = sum(frame_wire_bytes(request_id, seq, of, size, completion if seq == of - 1 else None)
                   for seq, size in sizes.items())
        conn = await self._idle.get()
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            if conn is None or conn.closed:
                conn = self.link.connect()
            if cancel is not None and cancel.is_set():
                return SendResult(request_id, 0, of, 0.0, True)
            if not await self._deliver(conn, wire, cancel):
                # Cancelled mid-transfer: the rest stops at once; the connection, cut mid-frame, is not reused.
                conn.close()
                conn = None
                return SendResult(request_id, 0, of, loop.time() - started, True)
        except ConnectionResetError as exc:
            self.failures += 1
            conn = None
            raise ConnectionError(f"KV transfer of {request_id} over {self.link.config!r} failed: {exc}") from exc
        finally:
            self._idle.put_nowait(conn)
        for seq, size in sizes.items():
            self.table.on_frame(request_id, seq, of, size, completion if seq == of - 1 else None)
        sent = sum(sizes.values())
        self.bytes_sent += sent
        if of - 1 in sizes:  # a streamed transfer is counted once, with its last part
            self.transfers += 1
        return SendResult(request_id, sent, len(sizes), loop.time() - started)

    async def _deliver(self, conn: VirtualConnection, wire: int, cancel: asyncio.Event | None) -> bool:
        """True when every byte landed; False when `cancel` was set first (the connection is then closed)."""
        if cancel is None:
            await conn.send(KV_DIRECTION, wire)
            return True
        sending = asyncio.ensure_future(conn.send(KV_DIRECTION, wire))
        stopping = asyncio.ensure_future(cancel.wait())
        try:
            await asyncio.wait((sending, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if sending.done():
            sending.result()  # a reset raises here
            return True
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        return False

    async def close(self) -> None:
        while not self._idle.empty():
            conn = self._idle.get_nowait()
            if conn is not None:
                conn.close()
