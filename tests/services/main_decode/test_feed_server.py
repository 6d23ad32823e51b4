"""A decode service's token feeds on their own TCP port: what a subscriber reads from a real socket."""

from __future__ import annotations

import asyncio

import pytest

from services.main_decode.feed import FeedClosed, FeedTable
from services.main_decode.feed_server import FeedServer
from services.rpc import feed_wire
from tests.waiting import until

DEADLINE_S = 5.0


class Subscriber:
    """A raw client of the port: the wire as a router sees it, value by value."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self._unpacker = reader, writer, feed_wire.unpacker()

    @classmethod
    async def connect(cls, server: FeedServer, name: str | None = "router") -> "Subscriber":
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        if name is not None:
            writer.write(feed_wire.hello(name))
        return cls(reader, writer)

    async def value(self):
        while True:
            for value in self._unpacker:
                return value
            data = await asyncio.wait_for(self.reader.read(65536), DEADLINE_S)
            if not data:
                return None  # the service hung up
            self._unpacker.feed(data)


@pytest.fixture
async def served():
    feeds = FeedTable()
    server = FeedServer(feeds, "127.0.0.1", 0, heartbeat_s=0.2)
    await server.start()
    yield feeds, server
    await server.close()


async def test_a_step_is_one_value_after_the_opening_one(served):
    feeds, server = served
    subscriber = await Subscriber.connect(server)
    assert await subscriber.value() == [[], [], []]  # the feed is open
    feed = feeds.get("router")
    for rid, position in (("a", 0), ("b", 4), ("a", 1)):
        feed.put(rid, position, 100 + position)  # one loop pass: one step
    assert await subscriber.value() == [["a", "b", "a"], [0, 4, 1], [100, 104, 101]]
    feed.put("c", 0, 7)
    assert await subscriber.value() == [["c"], [0], [7]]


async def test_an_idle_feed_sends_empty_steps_so_the_subscriber_can_tell_it_is_alive(served):
    _, server = served
    subscriber = await Subscriber.connect(server)
    assert await subscriber.value() == [[], [], []]
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await subscriber.value() == [[], [], []]  # a heartbeat, within one period and a bit
    assert loop.time() - start < DEADLINE_S


async def test_a_subscriber_that_hangs_up_closes_its_feed_and_fails_the_calls_writing_to_it(served):
    feeds, server = served
    subscriber = await Subscriber.connect(server)
    await subscriber.value()
    feed = feeds.get("router")
    subscriber.writer.close()
    await until(lambda: feed.closed, "the feed closed", DEADLINE_S)
    assert feeds.get("router") is None and not server.connections
    with pytest.raises(FeedClosed):
        feed.put("a", 0, 1)


async def test_a_second_connection_of_the_same_subscriber_replaces_the_first(served):
    feeds, server = served
    first = await Subscriber.connect(server)
    await first.value()
    old = feeds.get("router")
    second = await Subscriber.connect(server)
    await second.value()
    assert old.closed and feeds.get("router") is not old and len(feeds) == 1


async def test_a_connection_that_names_no_subscriber_is_cut_off(served, monkeypatch):
    monkeypatch.setattr(feed_wire, "HELLO_S", 0.1)
    _, server = served
    silent = await Subscriber.connect(server, name=None)
    assert await silent.value() is None and not server.connections


async def test_a_bad_hello_is_cut_off_and_the_port_keeps_serving(served):
    feeds, server = served
    bad = await Subscriber.connect(server, name=None)
    bad.writer.write(b"\x93\x01\x02\x03")  # a msgpack array, not a hello
    assert await bad.value() is None and len(feeds) == 0
    good = await Subscriber.connect(server)
    assert await good.value() == [[], [], []]
