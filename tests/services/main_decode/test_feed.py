"""The decode side of the token feed: one message per batch of tokens put in one loop pass."""

from __future__ import annotations

import asyncio

import pytest

from services.main_decode.feed import FeedClosed, FeedTable


async def test_tokens_put_in_one_pass_leave_in_one_message_in_order():
    feed = FeedTable().open("router")
    messages = feed.messages()
    opening = await anext(messages)
    assert list(opening.request_id) == []  # the feed says it is open before any token
    for rid, position in (("a", 0), ("b", 4), ("a", 1)):
        feed.put(rid, position, 100 + position)
    message = await asyncio.wait_for(anext(messages), 5)
    assert list(zip(message.request_id, message.position, message.token)) == [("a", 0, 100), ("b", 4, 104),
                                                                             ("a", 1, 101)]
    waiting = asyncio.ensure_future(anext(messages))
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing put: nothing sent
    feed.put("c", 0, 7)
    assert list((await asyncio.wait_for(waiting, 5)).request_id) == ["c"]


async def test_a_step_of_many_streams_is_one_message():
    """Each stream's task puts its token when the step wakes it; the writer runs after all of them."""
    feed = FeedTable().open("router")
    messages = feed.messages()
    await anext(messages)
    step = asyncio.get_running_loop().create_future()

    async def stream(i: int) -> None:
        await step
        feed.put(f"r{i}", 3, i)

    tasks = [asyncio.create_task(stream(i)) for i in range(32)]
    reading = asyncio.ensure_future(anext(messages))
    await asyncio.sleep(0)
    step.set_result(None)
    message = await asyncio.wait_for(reading, 5)
    await asyncio.gather(*tasks)
    assert len(message.request_id) == 32


async def test_a_closed_feed_refuses_tokens_and_a_second_open_closes_the_first():
    table = FeedTable()
    first = table.open("router")
    second = table.open("router")
    assert first.closed and table.get("router") is second
    with pytest.raises(FeedClosed):
        first.put("a", 0, 1)
    table.close(second)
    assert table.get("router") is None and len(table) == 0
    assert table.get("") is None
