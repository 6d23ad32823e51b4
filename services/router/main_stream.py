"""Main decode's stream in P-RLD-MD: watched while the relay streams, then read by the request's own task.

Main decode sends nothing before the handoff but a failure, and after it most
of the request's tokens. Reading it through a second task that forwards each
event would cost every one of those tokens a second wake-up at the router. So
only its first event is awaited in the background (a failure there, before the
handoff, makes the relay finish the request); from the cut on, the request's
task reads the stream itself (docs/pdd.md §Request flow).
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Awaitable, Callable

from services.roles import DecodeStream, Token, token_count
from services.router.failures import ApiError, api_error
from services.router.pipelines import Job
from services.router.stats import HandoffStats, PddStats
from services.types import RoleError


class MainStream:
    def __init__(self, call: DecodeStream, fall_back: Callable[[], Awaitable[None]]) -> None:
        self.handed_off = False  # set by the request's task once the relay names the cut
        self._events = call.__aiter__()
        self._first = asyncio.ensure_future(self._events.__anext__())
        self._fall_back, self._fallback_task = fall_back, None
        self._first.add_done_callback(self._watch)

    def _watch(self, first: asyncio.Future) -> None:
        if first.cancelled() or self.handed_off:
            return
        if isinstance(first.exception(), RoleError):  # a failed call, or its token feed broke
            # Main decode is gone before taking over: the relay finishes the request instead.
            self._fallback_task = asyncio.ensure_future(self._fall_back())

    async def tokens(self, stats: PddStats, job: Job, cut: int) -> AsyncIterator[Token]:
        """Main decode's stream after the cut: tokens from position `cut` on (its stats go into `stats`)."""
        try:
            event = await self._first
            while True:
                count = token_count(event)
                if count:
                    first = event if type(event) is Token else event[0]
                    if first.position < cut:
                        raise ApiError(502, f"main decode produced position {first.position} before the cut {cut}",
                                       kind="upstream_error")
                    stats.md_tokens += count
                    yield event
                else:
                    _handoff_stats(event, stats, job)
                event = await self._events.__anext__()
        except StopAsyncIteration:
            return
        except RoleError as exc:
            raise api_error(exc, "main decode") from exc
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():
                raise  # the request itself is cancelled
            raise ApiError(502, "main decode stream was cancelled", kind="upstream_error") from None

    async def close(self) -> None:
        """End the stream's reading here (the call itself is cancelled by the pipeline)."""
        if self._fallback_task is not None:
            self._fallback_task.cancel()
        if not self._first.done():
            self._first.cancel()
        else:
            await self._events.aclose()


def _handoff_stats(s, stats: PddStats, job: Job) -> None:
    stats.kv_transfer_s = s.kv_transfer_s
    job.timeline["kv_arrived"] = s.kv_arrived_unix
    job.timeline["handoff_started"] = s.handoff_started_unix
    stats.handoff = HandoffStats(s.handoff_mode, s.handoff_chunks, round(s.handoff_stall_s, 6), s.handed_off_at)
