"""Sub-millisecond timers for the delay line: one Linux timerfd per link, watched by the loop.

asyncio's own timers wake through epoll_wait, whose timeout is whole
milliseconds, so a write due at t happens somewhere in [t, t + 1 ms). A timerfd
armed at an absolute CLOCK_MONOTONIC time (the clock loop.time() reads) makes
the loop's fd readable at t itself, so writes land within the kernel's timer
wake-up latency of their deadline (docs/netem.md, "Timer precision").
Where timerfd is missing, PreciseTimers falls back to LoopTimers.
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import itertools
import os
from typing import Any, Callable, Protocol

CLOCK_MONOTONIC = 1
TFD_NONBLOCK = 0o4000
TFD_CLOEXEC = 0o2000000
TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.timerfd_create  # noqa: B018 - raises AttributeError where there is none
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


EPOLL_LEAD = 0.0005


class Timers(Protocol):
    """What the delay line arms its timers on: PreciseTimers, or LoopTimers."""

    lead: float  # armed this much before a deadline
    margin: float  # chunks due within this much of now go out together

    def call_at(self, when: float, callback: Callable[[], None]) -> Any: ...


class LoopTimers:
    """The loop's own timers: armed `lead` early, so the ms-rounded wake-up centres on the deadline.

    A timer armed for t - lead wakes in [t - lead, t - lead + 1 ms); sending what
    is due within `margin` of now puts each write within about +-0.5 ms of its
    deadline, without bias.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, lead: float = EPOLL_LEAD) -> None:
        self._loop = loop
        self.lead = self.margin = lead

    def call_at(self, when: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        return self._loop.call_at(when - self.lead, callback)

    def close(self) -> None:
        pass


class TimerHandle:
    __slots__ = ("when", "callback", "cancelled")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when, self.callback, self.cancelled = when, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class PreciseTimers:
    """call_at(when, callback) -> handle with cancel(), like the loop's, on a timerfd.

    Between the kernel firing the timerfd and our callback running there is a
    wake-up latency (about 0.1 ms on a busy VM). We measure it on every wake-up
    and arm that much early, so callbacks run centred on their deadlines instead
    of always late. The lead tracks the median latency (a step up when a wake-up
    was later than the lead, a step down otherwise), so the rare wake-up that a
    loaded machine delays by milliseconds does not drag every other one early.
    """

    MAX_LEAD = 0.0005
    LEAD_STEP = 5e-6

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._fallback = LoopTimers(loop)
        self.lead = 0.0
        self.margin = 0.0
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()
        self._armed_at: float | None = None
        self._fd = -1
        if _LIBC is not None and hasattr(loop, "add_reader"):
            fd = _LIBC.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                loop.add_reader(fd, self._fire)

        else:
            self.lead, self.margin = self._fallback.lead, self._fallback.margin

    @property
    def precise(self) -> bool:
        return self._fd >= 0

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle | asyncio.TimerHandle:
        if self._fd < 0:
            return self._fallback.call_at(when, callback)
        handle = TimerHandle(when, callback)
        heapq.heappush(self._heap, (when, next(self._seq), handle))
        if self._armed_at is None or when - self.lead < self._armed_at:
            self._arm(when - self.lead)
        return handle

    def _arm(self, when: float) -> None:
        seconds = int(when)
        nanos = max(1, int((when - seconds) * 1e9)) if seconds == 0 else int((when - seconds) * 1e9)
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(seconds, nanos))  # it_value 0 would disarm
        _LIBC.timerfd_settime(self._fd, TFD_TIMER_ABSTIME, ctypes.byref(spec), None)  # type: ignore[union-attr]
        self._armed_at = when

    def _fire(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            pass  # re-armed for later after the kernel flagged it; nothing due yet
        now = self._loop.time()
        if self._armed_at is not None and now >= self._armed_at:
            step = self.LEAD_STEP if now - self._armed_at > self.lead else -self.LEAD_STEP
            self.lead = self.margin = min(max(self.lead + step, 0.0), self.MAX_LEAD)
        self._armed_at = None
        heap = self._heap
        due = now + self.margin
        while heap and (heap[0][2].cancelled or heap[0][0] <= due):
            _, _, handle = heapq.heappop(heap)
            if not handle.cancelled:
                handle.callback()
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        if heap:
            self._arm(heap[0][0] - self.lead)

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        self._heap.clear()
