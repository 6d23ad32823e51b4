"""A fake event loop clock and fake transports, for testing the delay line without real time."""

from __future__ import annotations

import heapq
import itertools
from typing import Callable


class FakeHandle:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeLoop:
    """time() and call_at() over a clock that moves only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self._timers: list[tuple[float, int, FakeHandle]] = []
        self._seq = itertools.count()

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> FakeHandle:
        handle = FakeHandle(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), handle))
        return handle

    def advance_to(self, t: float, lateness: float = 0.0) -> None:
        """Run every timer due by t; each fires `lateness` seconds after its deadline."""
        while self._timers and self._timers[0][0] <= t:
            when, _, handle = heapq.heappop(self._timers)
            if handle.cancelled:
                continue
            self.now = max(self.now, when + lateness)
            handle.callback()
        self.now = max(self.now, t)

    def pending(self) -> list[float]:
        return sorted(when for when, _, h in self._timers if not h.cancelled)


class FakeSink:
    def __init__(self, loop: FakeLoop) -> None:
        self.loop = loop
        self.writes: list[tuple[float, bytes]] = []
        self.eof_at: float | None = None

    def write(self, data: bytes | memoryview) -> None:
        self.writes.append((self.loop.time(), bytes(data)))

    def write_eof(self) -> None:
        self.eof_at = self.loop.time()

    def can_write_eof(self) -> bool:
        return True

    def is_closing(self) -> bool:
        return False

    @property
    def data(self) -> bytes:
        return b"".join(d for _, d in self.writes)


class FakeSource:
    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return False
