"""One direction of one connection: sender -> stamped chunks -> receiver, in order.

Bytes read from the source are cut into pieces, stamped on entry and given a
deadline by the chain of stages; they wait in a FIFO and one timer, armed for
the head's deadline (an absolute loop time), writes out everything due. Sleep
error therefore never accumulates: a late timer makes one write late, not the
ones after it (docs/netem.md, "Delay line").
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from typing import Callable

from netem.config import DirectionConfig
from netem.direction import DirectionState
from netem.stages.base import Chunk, Stage, run_stages
from netem.stages.loss import LossStall
from netem.stages.order import InOrder
from netem.stages.window import Window

# A timer may fire up to the clock's resolution early; chunks due within this
# margin go out with the ones already due rather than re-arming the timer.
DUE_MARGIN = 1e-6


class Flow:
    def __init__(self, direction: DirectionState, loop: asyncio.AbstractEventLoop, rng: random.Random) -> None:
        self.direction = direction
        self._loop = loop
        self.window = Window()
        self.loss = LossStall(rng)
        self.order = InOrder()
        # Physical order: the sender's window, the shared line, the path, a
        # retransmission if a segment was lost, then the receiver's reassembly.
        self._stages: tuple[Stage, ...] = (self.window, direction.serializer, direction.latency, self.loss, self.order)
        self._queue: deque[Chunk] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.held_bytes = 0
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
        for start in range(0, size, piece):
            part = view[start : start + piece]
            self._queue.append(run_stages(self._stages, Chunk(part, len(part), now, now)))
        self.held_bytes += size
        self.direction.counters["bytes_in"] += size
        self.direction.add_held(size)
        self.release()

    def feed_eof(self) -> None:
        """The sender closed its half: a FIN travels the same path, after the data."""
        if self.closed:
            return
        now = self._loop.time()
        self._queue.append(run_stages(self._stages, Chunk(None, 0, now, now)))
        self.release()

    # -- output ----------------------------------------------------------
    def release(self) -> None:
        """Write out every chunk whose deadline has come; arm the timer for the next."""
        if self.closed or self.sink is None or not self._queue:
            return
        now = self._loop.time()
        held_until = self.direction.partition.held_until(now)
        if held_until is not None:
            self._arm(held_until)
            return
        queue, sink, direction = self._queue, self.sink, self.direction
        delivered = 0
        eof = False
        while queue and queue[0].deadline <= now + DUE_MARGIN:
            chunk = queue.popleft()
            if chunk.data is None:
                eof = True
                break
            sink.write(chunk.data)
            delivered += chunk.size
            direction.record_delivery(chunk.size, max(0.0, now - chunk.deadline))
        if delivered:
            self.held_bytes -= delivered
            direction.release_held(delivered)
        if eof:
            self._deliver_eof()
        elif queue:
            self._arm(queue[0].deadline)

    def _deliver_eof(self) -> None:
        self.eof_delivered = True
        if self.sink is not None and self.sink.can_write_eof() and not self.sink.is_closing():
            self.sink.write_eof()
        self.on_eof_delivered()

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            if self._timer_at == when:
                return
            self._timer.cancel()
            self._timer = None
        if when == float("inf"):
            return  # held until a heal kicks the direction
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._on_timer)

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
        pause = self.sink_paused or self.direction.over_limit
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
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._queue.clear()
        if self.held_bytes:
            self.direction.release_held(self.held_bytes)
            self.held_bytes = 0
        self.direction.counters["loss_stalls"] += self.loss.stalls
        self.direction.flows.discard(self)

    @property
    def pending(self) -> int:
        return len(self._queue)
