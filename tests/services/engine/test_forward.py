"""A sequence's tokens handed to a sink as each step ends, instead of waking a reader per token."""

from __future__ import annotations

from services.engine.sequence import TokenEvent
from tests.services.engine.conftest import collect, fresh, prompt


async def test_a_sink_takes_every_token_at_its_step_end_and_events_keeps_the_rest(make_engine):
    engine = await make_engine()
    handle = engine.submit(fresh("r", prompt(32), generate=6))
    taken: list[TokenEvent] = []

    def sink(event) -> bool:
        if type(event) is TokenEvent:
            taken.append(event)
            return True
        return False

    handle.forward(sink)
    tokens, finished = await collect(handle)
    assert tokens == [] and finished is not None  # only the end came through events()
    assert [t.position for t in taken] == list(range(6))
    assert all(a.t < b.t for a, b in zip(taken, taken[1:]))  # one step each, stamped with its end


async def test_once_the_sink_declines_a_token_the_following_ones_queue_behind_it(make_engine):
    engine = await make_engine()
    handle = engine.submit(fresh("r", prompt(32), generate=5))
    offered: list[int] = []

    def sink(event) -> bool:
        if type(event) is not TokenEvent:
            return False
        offered.append(event.position)
        return event.position < 2  # takes 0 and 1, declines 2

    handle.forward(sink)
    tokens, _ = await collect(handle)
    assert [t.position for t in tokens] == [2, 3, 4]  # order kept: nothing jumps the declined token
    assert offered[:3] == [0, 1, 2]
