"""The transfers a KV receiver holds: bytes over a data-plane TCP link, their figures with the last frame.

A transfer is complete when every frame has arrived intact and its figures and
first token are known: from the last frame's completion (or from a gRPC announce,
which the mesh now sends only to fail a transfer whose bytes will not come). Its
time is measured from prefill's end to the last frame, so a streamed transfer
counts only the part its overlap with prefill did not hide (docs/mesh.md
§Transfer time). Either a frame or the decode request may arrive first, so an
entry is created by whichever comes first and expires at its deadline; one that
frames opened and no request claims is dropped after `unclaimed_s`, its frames
counted as orphans, and at most UNCLAIMED_KEPT such entries are held at once.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from services.kv.frames import Completion


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
    claimed: bool = False  # a decode request awaits it or an announce sized it; else frames opened it
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    @property
    def seconds(self) -> float:
        return self.finished_at - self.announced_at


ENDED_KEPT = 4096  # assumed: more requests than a decode process ends within a transfer deadline
UNCLAIMED_KEPT = 4096  # the same bound on transfers whose frames came before (or without) their request


class TransferTable:
    """`unclaimed_s`: how long frames may wait for their request before they are dropped as orphans;
    the mesh's is its transfer deadline, the longest a request's bytes may precede it and still count."""

    def __init__(self, unclaimed_s: float = 120.0) -> None:
        self.unclaimed_s = unclaimed_s
        self._transfers: dict[str, Transfer] = {}
        # Transfers opened by a frame and not yet claimed, oldest first: frames for unknown requests (a
        # peer's bug, or an attack of 100,000 made-up ids) open nothing that outlives unclaimed_s.
        self._unclaimed: OrderedDict[str, float] = OrderedDict()  # request id -> opened at, the loop's clock
        self._expiry: asyncio.TimerHandle | None = None
        self.orphans_expired = 0
        # Requests whose wait is over here. A late announce of one (a retry's first attempt unwinding,
        # an abort crossing after main decode gave up) would open a transfer nobody awaits.
        self._ended: OrderedDict[str, None] = OrderedDict()
        self.late_announces = 0  # announces of such requests: acknowledged, their frames counted as orphans
        self.completed = 0
        self.failed = 0
        self.orphan_frames = 0
        self.bytes_received = 0

    def entry(self, request_id: str, claim: bool = True) -> Transfer:
        transfer = self._transfers.get(request_id)
        if transfer is None:
            transfer = self._transfers[request_id] = Transfer(request_id, time.monotonic())
            if not claim:
                self._hold_unclaimed(request_id)
        if claim and not transfer.claimed:
            transfer.claimed = True
            self._unclaimed.pop(request_id, None)
        return transfer

    def _hold_unclaimed(self, request_id: str) -> None:
        loop = asyncio.get_running_loop()
        self._unclaimed[request_id] = loop.time()
        if len(self._unclaimed) > UNCLAIMED_KEPT:
            self._drop_unclaimed(next(iter(self._unclaimed)))
        if self._expiry is None:
            self._expiry = loop.call_later(self.unclaimed_s, self._expire_unclaimed)

    def _expire_unclaimed(self) -> None:
        """Drop the transfers unclaimed for unclaimed_s; wake again for the oldest left."""
        loop = asyncio.get_running_loop()
        self._expiry = None
        while self._unclaimed:
            oldest, opened = next(iter(self._unclaimed.items()))
            if opened + self.unclaimed_s > loop.time():
                self._expiry = loop.call_at(opened + self.unclaimed_s, self._expire_unclaimed)
                return
            self._drop_unclaimed(oldest)

    def _drop_unclaimed(self, request_id: str) -> None:
        """Its frames become orphans, counted; its later frames too (it is ended here)."""
        self._unclaimed.pop(request_id)
        transfer = self._transfers.pop(request_id)
        self.orphans_expired += 1
        self.orphan_frames += len(transfer.received_frames)
        transfer.done.cancel()
        self._end(request_id)

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
            transfer = self.entry(request_id, claim=False)  # its bytes came before its decode request did
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
        self._unclaimed.pop(request_id, None)
        if transfer is not None and not transfer.done.done():
            transfer.done.cancel()
        self._end(request_id)

    def _end(self, request_id: str) -> None:
        self._ended[request_id] = None
        if len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None


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
