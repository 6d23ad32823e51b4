"""A sequence's controls through its handle: cancel, pause, limits, extend, caught_up."""

import asyncio

import pytest

from services.engine.batch import Chunk
from services.engine.scheduler import EngineStopped
from services.engine.sequence import Sequence, TokenEvent
from services.engine.tokens import output_token, prompt_fingerprint
from tests.services.engine.conftest import VOCAB, RecordingClock, collect, fresh, next_tokens, prompt


async def test_cancel_ends_the_stream_and_frees_blocks(make_engine):
    engine = await make_engine()
    handle = engine.submit(fresh("r", prompt(100), generate=1000))
    await next_tokens(handle, 3)
    assert engine.stats().kv_blocks_used > 0
    handle.cancel()
    tokens, finished = await collect(handle)
    assert finished is None
    stats = engine.stats()
    assert (stats.kv_blocks_used, stats.running, stats.requests_cancelled) == (0, 0, 1)


async def test_a_paused_sequence_takes_a_handoff_then_continues(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock)
    ids = prompt(300)
    fingerprint = prompt_fingerprint(ids)
    expected = [output_token(fingerprint, p, 1, VOCAB) for p in range(40)]
    seq = Sequence("r", ids + expected[:1], prompt_len=300, kv_tokens=300, generate=39, first_position=1, seed=1)
    handle = engine.submit(seq)
    handle.pause()
    driver = engine.submit(fresh("driver", prompt(10, salt=3), generate=50))
    await next_tokens(driver, 3)
    handle.extend(expected[1:20])  # tokens another instance generated meanwhile
    extend_chunk = Chunk(new_tokens=19, cached_tokens=300)
    for _ in range(20):  # each driver token is one more step; the extend is planned within a few
        if any(extend_chunk in b.chunks for b in clock.batches):
            break
        await next_tokens(driver, 1)
    assert any(extend_chunk in b.chunks for b in clock.batches), clock.batches[-3:]
    assert handle.stats.generated_tokens == 0
    handle.resume()
    tokens, _ = await collect(handle)
    assert [t.token_id for t in tokens] == expected[20:]
    assert tokens[0].position == 20


async def test_a_limit_holds_generation_until_raised(make_engine):
    engine = await make_engine()
    handle = engine.submit(fresh("r", prompt(20), generate=10))
    handle.set_limit(3)
    driver = engine.submit(fresh("driver", prompt(10, salt=3), generate=50))
    first = await next_tokens(handle, 3)
    await next_tokens(driver, 5)
    assert [t.position for t in first] == [0, 1, 2] and handle.stats.generated_tokens == 3
    handle.set_limit(None)
    rest, finished = await collect(handle)
    assert [t.position for t in rest] == list(range(3, 10)) and finished is not None


async def test_caught_up_returns_once_a_held_extend_is_computed(make_engine):
    engine = await make_engine()
    prompt = list(range(1, 101))
    relay_ids = [5, 6, 7, 8, 9, 10, 11, 12]
    seq = Sequence(request_id="handoff", context=prompt + relay_ids, prompt_len=len(prompt), kv_tokens=len(prompt),
                   generate=4, first_position=len(relay_ids), seed=1)
    handle = engine.submit(seq)
    handle.set_limit(len(relay_ids))  # hold: compute the backlog, produce nothing yet
    await asyncio.wait_for(handle.caught_up(), 5)
    assert handle.stats.generated_tokens == 0
    assert handle.stats.computed_tokens == len(relay_ids) - 1
    handle.set_limit(None)
    tokens = [e async for e in handle.events() if isinstance(e, TokenEvent)]
    assert [t.position for t in tokens] == [8, 9, 10, 11]


async def test_caught_up_raises_when_the_sequence_is_cancelled(make_engine):
    engine = await make_engine()
    seq = Sequence(request_id="gone", context=[i % 900 for i in range(4999)], prompt_len=4999, kv_tokens=0, generate=2,
                   first_position=0, seed=1)
    handle = engine.submit(seq)
    waiter = asyncio.ensure_future(handle.caught_up())
    handle.cancel()
    with pytest.raises(EngineStopped):
        await asyncio.wait_for(waiter, 5)
