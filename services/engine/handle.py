"""What Engine.submit returns: one sequence's event stream and the controls a role has over it.

Its events come from the engine's step loop (services/engine/scheduler.py); pause, limits and
extend take effect from the next step (docs/engine.md, "Pause, limits and extend").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from services.engine.sequence import _END, EngineStopped, FinishedEvent, SequenceState, SequenceStats, Status, TokenEvent
from services.types import TokenId

if TYPE_CHECKING:
    from services.engine.scheduler import Engine


class SequenceHandle:
    """What submit() returns: the event stream of one sequence and its controls."""

    def __init__(self, engine: Engine, state: SequenceState) -> None:
        self._engine = engine
        self._state = state

    @property
    def request_id(self) -> str:
        return self._state.request_id

    @property
    def stats(self) -> SequenceStats:
        return self._state.stats

    @property
    def status(self) -> Status:
        return self._state.status

    @property
    def next_position(self) -> int:
        """Output position of the next token this engine will generate."""
        return self._state.next_position

    async def events(self) -> AsyncIterator[TokenEvent | FinishedEvent]:
        """TokenEvents in position order, then one FinishedEvent; ends early on cancel, raises EngineStopped."""
        queue = self._state.events
        while True:
            event = await queue.get()
            if event is _END or isinstance(event, BaseException):
                queue.put(event)  # a later events() call ends the same way instead of hanging
                if event is _END:
                    return
                raise event
            yield event
            if isinstance(event, FinishedEvent):
                queue.put(_END)
                return

    async def caught_up(self) -> None:
        """Return once all its context but the last token has KV: a held sequence has nothing left to compute."""
        state = self._state
        while state.computed < state.context_len - 1:
            if state.status not in (Status.WAITING, Status.RUNNING):
                raise EngineStopped(f"{state.request_id} ended ({state.status.value}) before catching up")
            await asyncio.shield(self._engine._step_done())

    async def prefill_progress(self) -> AsyncIterator[int]:
        """Prompt tokens with KV here, after each step that added some; ends once the whole prompt has
        KV or the sequence ends. What a preempted sequence recomputes is not reported twice."""
        state = self._state
        reported = 0
        while True:
            computed = min(state.computed, state.prompt_len)
            if computed > reported:
                reported = computed
                yield computed
            if reported >= state.prompt_len or state.status not in (Status.WAITING, Status.RUNNING):
                return
            # Woken by a step that computed part of this prompt (or by the end), not by every step:
            # a queue of waiting prefills would otherwise wake on each step of the engine.
            waiter = state.progress_waiter
            if waiter is None or waiter.done():  # done: a reader before this one was cancelled
                waiter = state.progress_waiter = asyncio.get_running_loop().create_future()
            await waiter

    def forward(self, sink: Callable[[TokenEvent | FinishedEvent], bool]) -> None:
        """Offer each later event to `sink` as the step ends, before queueing it for events().

        An event the sink takes (returns True) is not queued, so no task wakes for it; one it
        declines, and every event after it, goes to events() as before, so order is kept.
        """
        self._state.events.sink = sink

    def cancel(self) -> None:
        """Stop the sequence now and free its KV blocks; no-op once it has ended."""
        self._engine._end(self._state, Status.CANCELLED, _END)

    def pause(self) -> None:
        """Generate nothing beyond what is already produced; takes effect from the next step."""
        self.set_limit(self._state.next_position)

    def resume(self) -> None:
        self.set_limit(None)

    def set_limit(self, position: int | None) -> None:
        """Generate only output positions below `position` (None: no limit) until raised."""
        self._state.limit = position
        self._engine._note_input()

    def extend(self, ids: list[TokenId]) -> None:
        """Append output tokens produced elsewhere (a handoff); they are computed as extend chunks.

        Meant for a paused sequence: a token this engine was producing meanwhile is discarded.
        """
        state = self._state
        if state.status not in (Status.WAITING, Status.RUNNING):
            raise ValueError(f"{state.request_id}: cannot extend a sequence that is {state.status.value}")
        if state.next_position + len(ids) >= state.end_position:
            raise ValueError(
                f"{state.request_id}: extending to position {state.next_position + len(ids)} leaves nothing "
                f"to generate before the end position {state.end_position}"
            )
        if state.context_len - state.computed <= 1:
            state.chunk_origin = state.computed  # a new extend: chunk boundaries count from here
        state.append(list(ids))
        self._engine._note_input()
