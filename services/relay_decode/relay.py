"""The relay's side of a P-RLD-MD request: eager tokens, a bounded output, and the handoff.

The relay decodes as soon as its KV lands (over RDMA) and streams tokens to the
router. Its output is capped at `relay_cap` positions: if main decode is still
not ready there, the request pauses rather than racing ahead. Main decode pulls
the generated ids with Handoff; with `stop`, the relay picks a cut position k,
produces exactly the positions below k, ends its stream and frees the request
(docs/pdd.md §Handoff). Only when the relay produces the request's last token
does the request end here (singular traffic, or a fallback ordered by the
router when main decode is unreachable).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable

from services.engine.scheduler import SequenceHandle
from services.engine.sequence import TokenEvent

HANDOFF_WAIT_S = 10.0  # the cut is at most one decode step away; this only bounds a stuck engine


@dataclass
class RelayedRequest:
    handle: SequenceHandle
    end_position: int  # max_tokens: positions 0 .. end_position-1
    ids: list[int] = field(default_factory=list)  # produced so far, position = index
    cut: int | None = None  # set by a stopping handoff
    limit: int | None = None  # the output cap in force (None: none)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def finished(self) -> bool:
        return len(self.ids) >= self.end_position

    @property
    def done(self) -> bool:
        return self.finished or (self.cut is not None and len(self.ids) >= self.cut)

    def produced(self, position: int, token: int) -> None:
        if position != len(self.ids):
            raise RuntimeError(f"relay got position {position}, expected {len(self.ids)}")
        self.ids.append(token)
        self.changed.set()

    def forwarding(self, sink: Callable[[object], bool]) -> Callable[[object], bool]:
        """`sink` for the engine (SequenceHandle.forward), with this request's bookkeeping of each token.

        It takes only a token that belongs before the cut, in order, and that `sink` took; any other
        event goes to the stream's reader, which ends the stream at the cut or raises.
        """
        def take(event: object) -> bool:
            if type(event) is not TokenEvent or event.position != len(self.ids) \
                    or (self.cut is not None and event.position >= self.cut) or not sink(event):
                return False
            self.produced(event.position, event.token_id)
            return True
        return take


@dataclass(frozen=True)
class StopWhen:
    """When a Handoff without stop stops the relay all the same (HandoffRequest.stop_when): main decode's
    rule for stopping, applied where the backlog is, so that the decision costs no second call."""

    backlog_at_most: int
    backlog_at_least: int | None = None
    load_at_least: float | None = None

    @classmethod
    def of(cls, message) -> StopWhen:
        """From a pb.StopWhen."""
        return cls(message.backlog_at_most,
                   message.backlog_at_least if message.HasField("backlog_at_least") else None,
                   message.load_at_least if message.HasField("load_at_least") else None)

    def holds(self, backlog: int, load: Callable[[], float]) -> bool:
        return backlog <= self.backlog_at_most \
            or (self.backlog_at_least is not None and backlog >= self.backlog_at_least) \
            or (self.load_at_least is not None and load() >= self.load_at_least)


class RelayLedger:
    def __init__(self) -> None:
        self.requests: dict[str, RelayedRequest] = {}
        self.expected: dict[str, asyncio.Event] = {}  # relayed requests whose KV has not landed yet
        self.handoffs = 0
        self.finished_here = 0

    def expect(self, request_id: str) -> None:
        self.expected[request_id] = asyncio.Event()

    def settle(self, request_id: str) -> None:
        """The request is decoding here now, or never will be (its transfer failed, or it ended)."""
        event = self.expected.pop(request_id, None)
        if event is not None:
            event.set()

    async def settled(self, request_id: str, timeout_s: float) -> None:
        """Wait until an expected request is here or known not to come: main decode's KV may land first."""
        event = self.expected.get(request_id)
        if event is not None and request_id not in self.requests:
            async with asyncio.timeout(timeout_s):
                await event.wait()

    def add(self, request_id: str, handle: SequenceHandle, first_token: int, end_position: int, cap: int) -> RelayedRequest:
        relayed = RelayedRequest(handle, end_position, [first_token])
        if cap and cap < end_position:
            relayed.limit = cap
            handle.set_limit(cap)
        self.requests[request_id] = relayed
        self.settle(request_id)
        return relayed

    def remove(self, request_id: str) -> None:
        self.requests.pop(request_id, None)

    async def _wait_until(self, relayed: RelayedRequest, count: int) -> None:
        async with asyncio.timeout(HANDOFF_WAIT_S):
            while len(relayed.ids) < count:
                relayed.changed.clear()
                await relayed.changed.wait()

    async def handoff(self, request_id: str, from_position: int, stop: bool, stop_when: StopWhen | None = None,
                      load: Callable[[], float] = lambda: 0.0) -> tuple[list[int], int, bool, bool]:
        """(ids from from_position, end position, stopped, finished). KeyError if unknown here.

        `stop_when` (without `stop`): stop if it holds for the backlog from from_position and `load`.
        """
        relayed = self.requests[request_id]
        if not stop and stop_when is not None and relayed.cut is None:
            stop = stop_when.holds(len(relayed.ids) - from_position, load)
        if stop and relayed.cut is None and not relayed.finished:
            # The next position may be in a step already running: let it land, then nothing more.
            cut = min(relayed.handle.next_position + 1, relayed.end_position,
                      relayed.limit if relayed.limit is not None else relayed.end_position)
            cut = max(cut, len(relayed.ids))
            relayed.cut = cut
            relayed.handle.set_limit(cut)
            await self._wait_until(relayed, cut)
            self.handoffs += 1
            if not relayed.finished:
                relayed.handle.cancel()  # released at once; ends the relay's stream at the cut
        end = relayed.cut if relayed.cut is not None else len(relayed.ids)
        end = min(end, len(relayed.ids))
        return relayed.ids[from_position:end], end, relayed.cut is not None, relayed.finished

    def set_limit(self, request_id: str, limit: int | None) -> None:
        relayed = self.requests[request_id]
        if relayed.cut is None:
            relayed.limit = limit
            relayed.handle.set_limit(limit)
