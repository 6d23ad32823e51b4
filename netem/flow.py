"""One direction of one connection: sender -> stamped chunks -> receiver, in order.

Bytes read from the source are cut into pieces and stamped on entry; the
sender's window stage runs, the direction's shared line serializes them, and
the path stages (latency, loss, order) give each its deadline. They wait in a
FIFO and one timer, armed for the head's deadline (an absolute loop time),
writes out everything due. Sleep error therefore never accumulates: a late
timer makes one write late, not the ones after it (docs/netem.md, "Delay line").

A piece the window holds for a later round waits on this flow, as unacknowledged
data waits in the sender's socket buffer, and joins the line when its round
comes: on the line's shared FIFO it would hold every other connection up behind it.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import deque
from typing import Any, Callable

from netem.config import DirectionConfig
from netem.direction import DirectionState
from netem.stages.base import Chunk, Stage, run_stages
from netem.stages.loss import LossStall
from netem.stages.order import InOrder
from netem.stages.window import Window
from netem.timers import Timers


class Flow:
    def __init__(
        self, direction: DirectionState, loop: asyncio.AbstractEventLoop, rng: random.Random, timers: Timers
    ) -> None:
        self.direction = direction
        self._loop = loop
        self._timers = timers
        self.window = Window()
        self.loss = LossStall(rng)
        self.order = InOrder()
        # Physical order: the sender's window, then the shared line (direction.line),
        # then the path, a retransmission if a segment was lost, and the
        # receiver's reassembly.
        self._before_line: tuple[Stage, ...] = (self.window,)
        self._after_line: tuple[Stage, ...] = (direction.latency, self.loss, self.order)
        self._queue: deque[Chunk] = deque()
        self._unstamped = 0  # chunks in _queue the line has not stamped yet (they are its tail)
        self._timer: Any = None
        self._timer_at = 0.0
        self._windowed: deque[Chunk] = deque()  # past the window's round, not yet on the line, in order
        self._windowed_bytes = 0
        self._window_timer: Any = None
        self.held_bytes = 0  # what this flow counts in the direction's queue: on the line or past it
        self.source: asyncio.ReadTransport | None = None
        self.sink: asyncio.WriteTransport | None = None
        self.sink_paused = False
        self.reading_paused = False
        self.closed = False
        self.eof_delivered = False
        self.on_eof_delivered: Callable[[], None] = lambda: None
        self.configure(direction.config, direction.rtt)
        direction.flows.add(self)
        direction.counters["connections_total"] += 1

    def configure(self, config: DirectionConfig, rtt: float) -> None:
        self.window.configure(config, rtt)
        self.loss.configure(config, rtt)
        self.order.configure(config, rtt)

    # -- input -----------------------------------------------------------
    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self.closed:
            return
        now = self._loop.time()
        view = memoryview(data)
        size = len(view)
        piece = self.direction.piece_bytes or size
        self.direction.counters["bytes_in"] += size
        for start in range(0, size, piece):
            part = view[start : start + piece]
            self._admit(Chunk(part, len(part), now, now))
        if self._windowed:
            self.update_reading()  # the window holds pieces back: at two rounds' worth, stop reading

    def feed_eof(self) -> None:
        """The sender closed its half: a FIN travels the same path, after the data."""
        if self.closed:
            return
        now = self._loop.time()
        self._admit(Chunk(None, 0, now, now))

    def _admit(self, chunk: Chunk) -> None:
        # Until the line stamps it the chunk's deadline is its send time; it
        # waits in our queue behind its elders either way, so order holds.
        run_stages(self._before_line, chunk)
        self._queue.append(chunk)
        self._unstamped += 1
        if self._windowed or chunk.deadline > chunk.entry:
            self._windowed.append(chunk)
            self._windowed_bytes += chunk.size
            if len(self._windowed) == 1:
                self._window_timer = self._timers.call_at(chunk.deadline, self._on_round)
            return
        self._to_line(chunk)

    def _to_line(self, chunk: Chunk) -> None:
        self.held_bytes += chunk.size
        self.direction.add_held(chunk.size)
        self.direction.line.enqueue(chunk, self._off_the_line)

    def _on_round(self) -> None:
        """The window's round has come for the held pieces at the head: they join the line."""
        self._window_timer = None
        due = self._loop.time() + self._timers.margin
        while self._windowed and self._windowed[0].deadline <= due:
            chunk = self._windowed.popleft()
            self._windowed_bytes -= chunk.size
            self._to_line(chunk)
        if self._windowed:
            self._window_timer = self._timers.call_at(self._windowed[0].deadline, self._on_round)
        self.update_reading()

    def _off_the_line(self, chunk: Chunk) -> None:
        run_stages(self._after_line, chunk)
        self._unstamped -= 1
        if self._queue and self._queue[0] is chunk:
            self.release()  # otherwise a timer is already armed for an older chunk

    def cap_deadlines(self, latest: float) -> None:
        """No stamped chunk waits past `latest` (see DirectionState._drain_at_new_settings)."""
        for chunk in itertools.islice(self._queue, len(self._queue) - self._unstamped):
            if chunk.deadline > latest:
                chunk.deadline = latest
        self.order.last_deadline = min(self.order.last_deadline, latest)
        self.release()

    # -- output ----------------------------------------------------------
    def release(self) -> None:
        """Write out every chunk whose deadline has come; arm the timer for the next."""
        if self.closed or self.sink is None or not self._queue:
            return
        now = self._loop.time()
        held_until = self.direction.partition.held_until(now)
        if held_until is not None:
            self._arm(held_until)  # exact: a partition ends when it says
            return
        queue, sink, direction = self._queue, self.sink, self.direction
        delivered = 0
        eof = False
        due = now + self._timers.margin
        stamped = len(queue) - self._unstamped
        while stamped and queue[0].deadline <= due:
            stamped -= 1
            chunk = queue.popleft()
            if chunk.data is None:
                eof = True
                break
            sink.write(chunk.data)
            delivered += chunk.size
            direction.record_delivery(chunk.size, now - chunk.deadline)
        if delivered:
            self.held_bytes -= delivered
            direction.release_held(delivered)
        if eof:
            self._deliver_eof()
        elif stamped:
            self._arm(queue[0].deadline)
        elif self._timer is not None:
            self._timer.cancel()  # the head is still on the line; it calls back when stamped
            self._timer = None

    def _deliver_eof(self) -> None:
        self.eof_delivered = True
        if self.sink is not None and self.sink.can_write_eof() and not self.sink.is_closing():
            try:
                self.sink.write_eof()
            except OSError:
                pass  # the peer reset meanwhile (ENOTCONN): there is no half to close any more
        self.on_eof_delivered()

    def _arm(self, when: float) -> None:
        """One timer per flow, for `when` (the timers apply their own lead)."""
        if self._timer is not None:
            if self._timer_at == when:
                return
            self._timer.cancel()
            self._timer = None
        if when == float("inf"):
            return  # held until a heal kicks the direction
        self._timer_at = when
        self._timer = self._timers.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.release()

    # -- backpressure ----------------------------------------------------
    def set_sink_paused(self, paused: bool) -> None:
        self.sink_paused = paused
        self.update_reading()

    def update_reading(self) -> None:
        """Read from the sender only while the receiver keeps up and the queue has room."""
        if self.source is None or self.closed:
            return
        # a window-bound flow reads ahead two rounds, as a socket buffer autotuned to twice the window holds
        pause = self.sink_paused or self.direction.over_limit or \
            self._windowed_bytes > 2 * self.window.round_bytes
        if pause != self.reading_paused and not self.source.is_closing():
            self.reading_paused = pause
            if pause:
                self.source.pause_reading()
            else:
                self.source.resume_reading()

    # -- teardown --------------------------------------------------------
    def close(self) -> None:
        """Forget the queued bytes (the connection is gone) and leave the direction."""
        if self.closed:
            return
        self.closed = True
        for timer in (self._timer, self._window_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._window_timer = None
        self._queue.clear()
        self._windowed.clear()
        self._windowed_bytes = 0
        self.direction.line.forget(self._off_the_line)
        if self.held_bytes:
            self.direction.release_held(self.held_bytes)
            self.held_bytes = 0
        self.direction.counters["loss_stalls"] += self.loss.stalls
        self.direction.flows.discard(self)
