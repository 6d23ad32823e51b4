"""Line rate: one serializer per direction, a FIFO shared by every connection on it.

A chunk starts serializing when both it and the line are ready, and leaves the
line size * 8 / rate later: `finish = max(free_at, ready) + size * 8 / rate`
(docs/netem.md, "Serialization"). Sharing one line makes concurrent transfers
split the rate as on a real link.

The rate is read when a chunk *starts* serializing, not when it was queued, so
a rate change acts on the backlog at once, as it would on a router's queue.
Chunks are stamped up to HORIZON ahead of the line's clock; the rest wait in
the FIFO and a timer stamps them as the line frees up. Times stay absolute:
each start is the previous finish, never "now".
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from netem.config import DirectionConfig
from netem.stages.base import Chunk

if TYPE_CHECKING:
    from netem.timers import Timers

# Large reads are cut into pieces of about this much line time, so a slow line
# hands the receiver bytes progressively rather than in one late burst.
PIECE_SECONDS = 0.002
MIN_PIECE_BYTES = 16 * 1024
HORIZON = 0.005  # how far ahead chunks are stamped; the lag of a rate change


def piece_bytes(rate_bps: float | None) -> int | None:
    """Largest piece a read is cut into at this rate; None means do not cut."""
    if rate_bps is None:
        return None
    return max(MIN_PIECE_BYTES, int(rate_bps / 8 * PIECE_SECONDS))


Stamped = Callable[[Chunk], None]  # called with each chunk as it leaves the line


class Line:
    def __init__(self) -> None:
        self.rate_bps: float | None = None
        self.free_at = float("-inf")
        self._waiting: deque[tuple[Chunk, Stamped]] = deque()
        self.waiting_bytes = 0
        self._clock: Callable[[], float] | None = None
        self._timers: Timers | None = None
        self._timer: Any = None
        self._timer_at = 0.0

    def bind(self, clock: Callable[[], float], timers: Timers) -> None:
        self._clock, self._timers = clock, timers

    def configure(self, config: DirectionConfig, rtt: float) -> None:
        # Stamped chunks keep their times; waiting ones will see the new rate.
        self.rate_bps = config.rate_bps
        self.pump()

    def now(self) -> float | None:
        return self._clock() if self._clock else None

    def cap_free_at(self, latest: float) -> None:
        """The line is free by `latest` at the most (a full queue re-timed to a new rate)."""
        if self.free_at > latest:
            self.free_at = latest
            self.pump()

    def finish_of(self, chunk: Chunk) -> float:
        start = max(self.free_at, chunk.deadline)
        return start if self.rate_bps is None else start + chunk.size * 8.0 / self.rate_bps

    def enqueue(self, chunk: Chunk, stamped: Stamped) -> None:
        """Queue a chunk (deadline = when it is ready to send); `stamped` runs when it leaves the line."""
        if not self._waiting and self._due(chunk):
            self._stamp(chunk, stamped)  # the common case: the line is (nearly) free
            return
        self._waiting.append((chunk, stamped))
        self.waiting_bytes += chunk.size
        self.pump()

    def _due(self, chunk: Chunk) -> bool:
        now = self._clock() if self._clock else chunk.deadline
        return max(self.free_at, chunk.deadline) <= now + HORIZON

    def _stamp(self, chunk: Chunk, stamped: Stamped) -> None:
        self.free_at = chunk.deadline = self.finish_of(chunk)
        stamped(chunk)

    def pump(self) -> None:
        """Stamp every waiting chunk that starts within the horizon; arm a timer for the next."""
        waiting = self._waiting
        while waiting and self._due(waiting[0][0]):
            chunk, stamped = waiting.popleft()
            self.waiting_bytes -= chunk.size
            self._stamp(chunk, stamped)
        when = max(self.free_at, waiting[0][0].deadline) - HORIZON if waiting and self._timers is not None else None
        if self._timer is not None:
            if when == self._timer_at:
                return  # armed for that instant already: a chunk queued behind the head changes nothing
            self._timer.cancel()
            self._timer = None
        if when is not None:
            self._timer_at = when
            self._timer = self._timers.call_at(when, self._on_timer)  # type: ignore[union-attr]

    def _on_timer(self) -> None:
        self._timer = None
        self.pump()

    def forget(self, owner: Stamped) -> None:
        """Drop the waiting chunks of a closed connection."""
        kept = deque(item for item in self._waiting if item[1] != owner)
        self.waiting_bytes = sum(chunk.size for chunk, _ in kept)
        self._waiting = kept
        self.pump()

    def backlog(self, now: float) -> float:
        """Seconds of line time owed to chunks stamped or waiting."""
        queued = self.waiting_bytes * 8.0 / self.rate_bps if self.rate_bps else 0.0
        return max(0.0, self.free_at - now) + queued

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
