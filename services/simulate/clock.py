"""Virtual time: an asyncio loop whose clock jumps to the next timer when nothing is ready.

    with virtual_runner() as runner:
        runner.run(main())            # emulated hours in milliseconds of wall time

The loop is the stock selector loop with two changes (docs/simulate.md, "The clock"):
`time()` reads a virtual counter, and its turn polls real file descriptors
without blocking; when nothing is ready it moves the counter to the earliest
scheduled timer instead of waiting for it. Timers, `asyncio.sleep`,
`asyncio.wait_for` and everything built on `call_at` therefore run unchanged,
in the same order as in real time, and nothing sleeps in real time.

Role code that stamps wall-clock times takes a `Clock` (`now()` for intervals,
`unix()` for timestamps); `RealClock` and `VirtualClock` both satisfy it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import selectors
import threading
import time
from asyncio import base_events
from contextlib import contextmanager
from typing import Any, Iterator, Protocol

# 2026-01-01T00:00:00Z: a fixed epoch keeps virtual timestamps identical from run to run.
DEFAULT_EPOCH_UNIX = 1_767_225_600.0
# While callbacks are ready the real descriptors are polled only this often: a simulation has none
# but the loop's own wake-up pipe, and a poll is a system call on every turn of the loop.
POLL_EVERY = 64
# The stock loop's rule for when cancelled timers are swept from the whole heap (asyncio.base_events).
_MIN_SCHEDULED = base_events._MIN_SCHEDULED_TIMER_HANDLES
_MIN_CANCELLED = base_events._MIN_CANCELLED_TIMER_HANDLES_FRACTION


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds, the timebase of the running loop's timers."""

    def unix(self) -> float:
        """Seconds since 1970 for timestamps (what `time.time()` gives in the mesh)."""


class RealClock:
    """The mesh's clock: the running loop's monotonic time and the system's wall clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def unix(self) -> float:
        return time.time()


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop on virtual time, starting at `start` seconds."""

    def __init__(self, start: float = 0.0) -> None:
        self._virtual_now = start
        super().__init__(selectors.DefaultSelector())
        self._busy_turns = 0
        self._timer_order = itertools.count()
        self.jumps = 0  # how many times time moved on: a measure of the simulation's work

    def time(self) -> float:
        return self._virtual_now

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> asyncio.TimerHandle:
        """The stock `call_at`, its timer filed in the heap as (when, order of scheduling, timer).

        The stock heap orders TimerHandles by their own `__lt__`, a Python call per comparison
        (several for every push and pop, half a million in a `-mini` run), and leaves timers due
        at the same instant in whatever order the heap's shape gives. A tuple compares in C, and
        timers due together run in the order they were scheduled.
        """
        if when is None:
            raise TypeError("when cannot be None")
        self._check_closed()  # type: ignore[attr-defined]
        if self._debug:  # type: ignore[attr-defined]
            self._check_thread()  # type: ignore[attr-defined]
            self._check_callback(callback, "call_at")  # type: ignore[attr-defined]
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._scheduled, (when, next(self._timer_order), timer))  # type: ignore[attr-defined]
        timer._scheduled = True
        return timer

    def _run_once(self) -> None:
        """One turn of `BaseEventLoop._run_once`, with its select replaced by the jump (docs/simulate.md, "The clock").

        Step for step the stock turn: cancelled timers leave the heap (all of them once they are
        most of it, else from its head), then the selector's turn, then every timer due within the
        clock's resolution joins the ready queue, then the callbacks ready at that point run in
        order. So timers and callbacks run in the stock loop's order (timers due at one instant in
        the order they were scheduled, `call_at`). The selector's turn is where the loop differs: with a timer pending and nothing
        ready, time jumps to the head's own deadline (so `time()` at the wake-up equals it) instead
        of waiting for it; the real descriptors are polled every POLL_EVERY turns, and blocked on
        only when no timer is left (another thread's `call_soon_threadsafe` can still wake the loop).
        Written out here rather than through the stock method and a wrapped selector: a simulation
        turns the loop about a hundred thousand times a minute of emulated time, and the calls
        between the two cost about a microsecond a turn.
        """
        scheduled, ready = self._scheduled, self._ready  # type: ignore[attr-defined]
        count = len(scheduled)
        if count > _MIN_SCHEDULED and self._timer_cancelled_count / count > _MIN_CANCELLED:  # type: ignore[attr-defined]
            for _, _, handle in scheduled:
                if handle._cancelled:
                    handle._scheduled = False
            scheduled = self._scheduled = [entry for entry in scheduled if not entry[2]._cancelled]
            heapq.heapify(scheduled)
            self._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0][2]._cancelled:
                self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
                heapq.heappop(scheduled)[2]._scheduled = False
        if ready or self._stopping or scheduled:  # type: ignore[attr-defined]
            idle = not ready and not self._stopping and scheduled[0][0] > self._virtual_now  # type: ignore[attr-defined]
            self._busy_turns += 1
            events = None
            if self._busy_turns >= POLL_EVERY:
                self._busy_turns = 0
                events = self._selector.select(0)  # type: ignore[attr-defined]
            if events:
                self._process_events(events)  # type: ignore[attr-defined]
            elif idle:
                self._virtual_now = scheduled[0][0]
                self.jumps += 1
        else:
            self._busy_turns = 0
            self._process_events(self._selector.select(0) or self._selector.select(None))  # type: ignore[attr-defined]
        end_time = self._virtual_now + self._clock_resolution  # type: ignore[attr-defined]
        while scheduled and scheduled[0][0] < end_time:
            handle = heapq.heappop(scheduled)[2]
            handle._scheduled = False
            ready.append(handle)
        debug = self._debug  # type: ignore[attr-defined]
        for _ in range(len(ready)):
            handle = ready.popleft()
            if handle._cancelled:
                continue
            if debug:  # virtual time stands still in a callback: no callback is ever slow, so no warning
                self._current_handle = handle
                try:
                    handle._run()
                finally:
                    self._current_handle = None
            else:
                handle._run()

    def _asyncgen_finalizer_hook(self, agen: Any) -> None:
        """An async generator dropped unfinished is closed by a task, as asyncio does, minus the wake-up.

        asyncio schedules the close through call_soon_threadsafe, because the collector may
        run in any thread; that writes the loop's wake-up pipe, a system call for every
        request's abandoned generators. On the loop's own thread call_soon does the same.
        """
        if threading.get_ident() != self._thread_id:  # type: ignore[attr-defined]
            super()._asyncgen_finalizer_hook(agen)  # type: ignore[misc]
            return
        self._asyncgens.discard(agen)  # type: ignore[attr-defined]
        if not self.is_closed():
            self.call_soon(self.create_task, agen.aclose())


class VirtualClock:
    """`Clock` on a virtual loop: `unix()` is the emulated epoch plus the loop's virtual time.

    Virtual time 0 is the epoch, whenever the clock is made, so stamps do not depend on it.
    """

    def __init__(self, loop: VirtualEventLoop, epoch_unix: float = DEFAULT_EPOCH_UNIX) -> None:
        self._loop = loop
        self.epoch_unix = epoch_unix

    def now(self) -> float:
        return self._loop.time()

    def unix(self) -> float:
        return self.epoch_unix + self._loop.time()


@contextmanager
def process_clocks(clock: Clock) -> Iterator[None]:
    """`time.time()` and `time.monotonic()` read `clock` while the block runs.

    The role code stamps and measures with the time module (KV transfer times,
    the `pdd` timeline, the handoff stall); in a simulation those must be
    emulated seconds, or a transfer would take the microseconds of wall time its
    simulation cost. The whole process is the simulation while this holds, so
    the module's two functions are swapped rather than every caller taught a
    Clock. `time.perf_counter()` stays real: it times the simulation itself.
    Modules that bound the functions at import (`from time import time`, as
    tqdm and threading do) keep the real ones.
    """
    saved = time.time, time.monotonic
    time.time, time.monotonic = clock.unix, clock.now  # type: ignore[assignment]
    try:
        yield
    finally:
        time.time, time.monotonic = saved  # type: ignore[assignment]


def virtual_runner(start: float = 0.0, debug: bool | None = None) -> asyncio.Runner:
    """An asyncio.Runner on a fresh VirtualEventLoop: `with virtual_runner() as r: r.run(coro)`."""
    return asyncio.Runner(debug=debug, loop_factory=lambda: VirtualEventLoop(start))


def run_virtual(main: Any, start: float = 0.0) -> Any:
    """asyncio.run(main) on virtual time."""
    with virtual_runner(start) as runner:
        return runner.run(main)
