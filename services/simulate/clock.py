"""Virtual time: an asyncio loop whose clock jumps to the next timer when nothing is ready.

    with virtual_runner() as runner:
        runner.run(main())            # emulated hours in milliseconds of wall time

The loop is the stock selector loop with two changes (docs/simulate.md, "The clock"):
`time()` reads a virtual counter, and the selector polls real file descriptors
without blocking; when nothing is ready it moves the counter to the earliest
scheduled timer instead of waiting for it. Timers, `asyncio.sleep`,
`asyncio.wait_for` and everything built on `call_at` therefore run unchanged,
in the same order as in real time, and nothing sleeps in real time.

Role code that stamps wall-clock times takes a `Clock` (`now()` for intervals,
`unix()` for timestamps); `RealClock` and `VirtualClock` both satisfy it.
"""

from __future__ import annotations

import asyncio
import selectors
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Protocol

# 2026-01-01T00:00:00Z: a fixed epoch keeps virtual timestamps identical from run to run.
DEFAULT_EPOCH_UNIX = 1_767_225_600.0
# While callbacks are ready the real descriptors are polled only this often: a simulation has none
# but the loop's own wake-up pipe, and a poll is a system call on every turn of the loop.
POLL_EVERY = 64


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


class _JumpingSelector:
    """Wraps a real selector: polls without blocking; when nothing is ready, advances the loop's time."""

    def __init__(self, loop: VirtualEventLoop, real: selectors.BaseSelector) -> None:
        self._loop = loop
        self._real = real
        self._busy_turns = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None:
            # Real I/O is read every POLL_EVERY turns, whether callbacks are ready or time is to
            # jump: a simulation's only descriptor is the loop's wake-up pipe, and what another
            # thread's call_soon_threadsafe schedules is in the ready queue before its byte is.
            self._busy_turns += 1
            if self._busy_turns < POLL_EVERY:
                if timeout:
                    self._loop._jump_to_next_timer()
                return []
        self._busy_turns = 0
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            # No timer at all: only real I/O (another thread's call_soon_threadsafe) can wake the loop.
            return self._real.select(None)
        self._loop._jump_to_next_timer()
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)  # register, unregister, modify, get_map, close


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop on virtual time, starting at `start` seconds."""

    def __init__(self, start: float = 0.0) -> None:
        self._virtual_now = start
        super().__init__(selectors.DefaultSelector())
        self._selector = _JumpingSelector(self, self._selector)  # type: ignore[assignment]
        self.jumps = 0  # how many times time moved on: a measure of the simulation's work

    def time(self) -> float:
        return self._virtual_now

    def _jump_to_next_timer(self) -> None:
        # _run_once has just dropped cancelled handles from the heap's head, so the head is
        # the next timer. Jump to its own `when` (not now + timeout): loop.time() equals it exactly.
        # Nothing moves while a callback is ready, one another thread has added included.
        scheduled, ready = self._scheduled, self._ready  # type: ignore[attr-defined]
        if not ready and scheduled and scheduled[0].when() > self._virtual_now:
            self._virtual_now = scheduled[0].when()
            self.jumps += 1

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
