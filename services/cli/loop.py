"""The event loop a mesh process runs on: uvloop for the router, the standard asyncio loop elsewhere.

uvloop does a task wake-up or a socket write in fewer microseconds than asyncio,
and the router's share of a streamed token is mostly such steps (docs/mesh-measured.md
§Cost of a streamed token has the measured difference). But libuv keeps time
and fires timers in whole milliseconds, and the engines' step deadlines and the
links' delays are timers of microsecond precision, so processes that emulate
time keep asyncio's loop. `PDD_EMU_EVENT_LOOP` (inherited by every process a
mesh starts) overrides this: `auto` (the default), `uvloop` or `asyncio` for all.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine, TypeVar

ENV = "PDD_EMU_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")
T = TypeVar("T")


def loop_name(keeps_time: bool) -> str:
    """The loop for a process; `keeps_time` for one whose timers are emulated durations."""
    choice = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{ENV}={choice!r}: choose one of {', '.join(CHOICES)}")
    if choice == "auto":
        return "asyncio" if keeps_time else "uvloop"
    return choice


def run(main: Coroutine[Any, Any, T], keeps_time: bool = True) -> T:
    """asyncio.run on the loop `loop_name` chooses."""
    if loop_name(keeps_time) == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
