"""Waiting for a condition a socket or another task makes true: polled, and always within a deadline."""

from __future__ import annotations

import asyncio
from typing import Callable

WAIT_S = 10.0


async def until(condition: Callable[[], object], what: str, timeout_s: float = WAIT_S, poll_s: float = 0.01) -> None:
    """Return once `condition()` holds; fail naming `what` if it does not within `timeout_s`."""
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():
                await asyncio.sleep(poll_s)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {timeout_s:g} s") from None
