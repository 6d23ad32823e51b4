"""The userspace link's model applied to message sizes: no sockets, no bytes, any event loop.

    async with VirtualLink(LinkConfig.symmetric(delay="20ms", rate="20gbit"), seed=1) as link:
        await link.send("up", 3 * 2**30)     # returns when the last byte would be delivered

It is the same machinery as UserspaceLink, not a copy of its formulas: the same
DirectionState (shared line, jitter source, partition, queue bound), the same
per-connection Flow (window, line, latency, loss, order) and the same control
methods, so `reconfigure`, `partition`, `heal`, `reset_connections` and
`run_schedule` mean what they mean in the mesh. Only the transports differ: a
message enters the flow as pieces of a shared zero buffer and a counting sink
stands in for the receiver (docs/simulate.md, "The links").

A message is cut only where the cut changes the result:
- into pieces of `piece_bytes(rate)` (2 ms of line time), the real link's own
  cut, so a rate change acts on the rest of a message as it does in the mesh;
- into at most a quarter of the queue bound, so the bound pauses the sender and
  resumes it at 75% as the mesh's sockets are paused.
A message enters a piece per loop pass, as the mesh's link reads every ready
connection once a pass: messages entering together share the line, none runs a
queue's worth ahead of the others.
Timers are the loop's own, armed without lead: on a virtual loop every delivery
lands exactly on its deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import deque
from typing import Callable
from netem.config import DIRECTIONS, Direction, LinkConfig
from netem.direction import QUEUE_PIECES
from netem.flow import Flow
from netem.link import UserspaceLink
from netem.timers import LoopTimers

NOWHERE = ("virtual", 0)  # a virtual link listens and connects nowhere
MAX_PIECE_BYTES = 16 * 2**20  # an unlimited line cuts nothing else; this bounds the zero buffer


class _InOrder:
    """Runs the wake-ups of one loop iteration sorted by connection number.

    The direction notifies its flows by iterating a set, whose order follows
    memory addresses; waking senders and receivers in that order would make two
    runs of the same simulation differ. Sorting by the order connections were
    opened makes them identical.
    """

    def __init__(self) -> None:
        self._due: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def later(self, key: int, callback: Callable[[], None]) -> None:
        if not self._due:
            asyncio.get_running_loop().call_soon(self._flush)
        self._due.append((key, next(self._seq), callback))

    def _flush(self) -> None:
        due, self._due = sorted(self._due, key=lambda item: item[:2]), []
        for _, _, callback in due:
            callback()


class _Sender:
    """Stands in for the sender's socket: the flow pauses and resumes reading from it.

    A message paused by the queue bound waits here; a resume wakes each waiting message once, in
    the order they paused, each at the loop pass's end, as an `asyncio.Event` wakes its waiters.
    A sender with no message waiting resumes at once, as a socket's reader is re-armed: nothing
    wakes, and the direction's every flip of its bound no longer costs each idle connection a callback.
    """

    def __init__(self, order: _InOrder, key: int) -> None:
        self._order, self._key = order, key
        self.resumed = True
        self._paused: deque[_Message] = deque()

    def pause_reading(self) -> None:
        self.resumed = False

    def resume_reading(self) -> None:
        if not self._paused:
            self.resumed = True
            return
        self._order.later(self._key, self._resume)

    def wait(self, message: _Message) -> None:
        self._paused.append(message)

    def _resume(self) -> None:
        self.resumed = True
        loop = asyncio.get_running_loop()
        while self._paused:
            loop.call_soon(self._paused.popleft().go_on)

    def is_closing(self) -> bool:
        return False


class _Message:
    """One message entering the link a piece at a time, by callbacks: a message that the queue bound
    cuts into hundreds of pieces costs no task wake-up per piece."""

    def __init__(self, conn: VirtualConnection, flow: Flow, sender: _Sender, nbytes: int) -> None:
        self._conn, self._flow, self._sender = conn, flow, sender
        self.remaining = nbytes

    def go_on(self, again: bool = False) -> None:
        """Feed one piece, and the next in the loop's next pass while the sender may go on.

        The mesh's link reads every ready connection once per loop pass, at most a quarter of the
        queue bound each, and a pause at the bound takes effect at the pass's end (docs/netem.md,
        "Sharing the line"), so messages entering together share the line piece by piece. A message
        that fed all it could at once would run a queue's worth ahead of the others. A woken message
        feeds its piece whatever the bound did earlier in the pass (`again` False); a further turn
        only while the sender has not been paused since."""
        conn, flow, state = self._conn, self._flow, self._flow.direction
        if conn.closed or not self.remaining:
            return
        if again and not self._sender.resumed:
            self._sender.wait(self)
            return
        piece = min(self.remaining, state.piece_bytes or MAX_PIECE_BYTES,
                    max(1, state.config.queue_bytes // QUEUE_PIECES))
        flow.feed(conn.link.zeros(piece))
        self.remaining -= piece
        if not self.remaining:
            return
        if self._sender.resumed:
            asyncio.get_running_loop().call_soon(self.go_on, True)
        else:
            self._sender.wait(self)  # the queue bound (or a reset) decides when the sender may go on


class _Receiver:
    """Stands in for the receiver's socket: counts delivered bytes and wakes the messages they complete."""

    def __init__(self, order: _InOrder, key: int) -> None:
        self._order, self._key = order, key
        self.delivered = 0
        self.waiting: deque[tuple[int, asyncio.Future[None]]] = deque()  # (stream offset of the last byte, done)

    def write(self, data: memoryview) -> None:
        self.delivered += len(data)
        while self.waiting and self.waiting[0][0] <= self.delivered:
            _, done = self.waiting.popleft()
            self._order.later(self._key, lambda done=done: done.done() or done.set_result(None))

    def fail(self, error: BaseException) -> None:
        while self.waiting:
            _, done = self.waiting.popleft()
            self._order.later(self._key, lambda done=done: done.done() or done.set_exception(error))

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return False


class VirtualConnection:
    """One connection through the link: messages on it arrive in order, as on one TCP stream."""

    def __init__(self, link: VirtualLink) -> None:
        self.link = link
        loop = asyncio.get_running_loop()
        self._flows: dict[Direction, Flow] = {}
        self._senders: dict[Direction, _Sender] = {}
        self._receivers: dict[Direction, _Receiver] = {}
        self._sent = dict.fromkeys(DIRECTIONS, 0)
        self.number = key = next(link.numbers)
        for side in DIRECTIONS:  # rng per direction in the order a real connection draws them
            flow = Flow(link.direction(side), loop, link.connection_rng(side), link.timers)  # type: ignore[arg-type]
            flow.source = self._senders[side] = _Sender(link.wakeups, key)  # type: ignore[assignment]
            flow.sink = self._receivers[side] = _Receiver(link.wakeups, key)  # type: ignore[assignment]
            self._flows[side] = flow
        self.closed = False
        link.register(self)  # type: ignore[arg-type]
        for flow in self._flows.values():
            flow.update_reading()  # born paused if the direction is over its queue bound

    async def send(self, direction: Direction, nbytes: int) -> None:
        """Return when the message's last byte reaches the far end; ConnectionResetError if reset first.

        An empty message returns once the messages before it have arrived. Cancelled while its
        bytes are still entering the link, the connection is closed: the stream would be cut
        mid-message, as a sender that gives up on a transfer closes its socket.
        """
        if nbytes < 0:
            raise ValueError(f"a message cannot have {nbytes} bytes")
        if self.closed:
            raise ConnectionResetError("the connection was reset")
        sender, receiver = self._senders[direction], self._receivers[direction]
        self._sent[direction] += nbytes
        done = asyncio.get_running_loop().create_future()
        receiver.waiting.append((self._sent[direction], done))
        message = _Message(self, self._flows[direction], sender, nbytes)
        if nbytes == 0:
            receiver.write(memoryview(b""))
        elif sender.resumed:
            message.go_on()
        else:
            sender.wait(message)
        try:
            await done
        except asyncio.CancelledError:
            done.cancel()  # nobody waits for it now: a later reset must not leave its error unretrieved
            if message.remaining:
                self.close()
            raise

    def reset(self) -> None:
        for flow in self._flows.values():
            flow.direction.counters["resets"] += 1
        self.close(reset=True)

    def close(self, reset: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        for side in DIRECTIONS:
            self._flows[side].close()
            self._senders[side].resume_reading()  # wake a paused sender so it sees the reset
            self._receivers[side].fail(ConnectionResetError("the connection was reset"))
        self.link.forget(self)  # type: ignore[arg-type]

    async def wait_closed(self) -> None:
        return None  # nothing to close but the flows, closed at once


class VirtualLink(UserspaceLink):
    """A link that shapes message sizes on whatever loop runs it; see the module doc."""

    def __init__(self, config: LinkConfig | None = None, seed: int | random.Random | None = None) -> None:
        super().__init__(NOWHERE, NOWHERE, config, seed)
        self._zeros = memoryview(b"")
        self.numbers = itertools.count()  # connections in the order opened
        self.wakeups = _InOrder()

    async def start(self) -> VirtualLink:
        self._loop = asyncio.get_running_loop()
        self.timers = LoopTimers(self._loop, lead=0.0)  # type: ignore[assignment]
        for state in self._directions.values():
            state.bind(self._loop.time, self.timers)  # type: ignore[arg-type]
        return self

    async def __aenter__(self) -> VirtualLink:
        return await self.start()

    def connect(self) -> VirtualConnection:
        """A new connection; refused with ConnectionResetError while a reject partition lasts."""
        if self.rejecting():
            self.direction("up").counters["resets"] += 1
            raise ConnectionResetError("the link rejects connections (partition)")
        return VirtualConnection(self)

    async def send(self, direction: Direction, nbytes: int) -> None:
        """One message on a connection of its own (a pool with a free connection), then closed."""
        conn = self.connect()
        try:
            await conn.send(direction, nbytes)
        finally:
            conn.close()

    def zeros(self, nbytes: int) -> memoryview:
        """A read-only view of nbytes zeros; the flows count bytes and never look at them."""
        if len(self._zeros) < nbytes:
            self._zeros = memoryview(bytes(nbytes))
        return self._zeros[:nbytes]
