"""The token feed's wire: a hello, then steps, as msgpack values that delimit themselves."""

from __future__ import annotations

import msgpack
import pytest

from services.rpc import feed_wire


def test_values_split_anywhere_come_out_whole_and_in_order():
    stream = feed_wire.hello("router") + feed_wire.step(["a", "b"], [0, 4], [7, 9]) + feed_wire.EMPTY_STEP
    reader = feed_wire.unpacker()
    values = []
    for i in range(0, len(stream), 3):  # three bytes a read: every value crosses a read boundary
        reader.feed(stream[i:i + 3])
        values += list(reader)
    assert feed_wire.subscriber_of(values[0]) == "router"
    assert feed_wire.step_of(values[1]) == [["a", "b"], [0, 4], [7, 9]] and feed_wire.step_of(values[2]) == [[], [], []]


@pytest.mark.parametrize("value", [["router"], {"v": 2, "subscriber": "router"}, {"v": 1, "subscriber": 3}])
def test_a_hello_that_is_not_the_wires_is_refused_with_what_was_expected(value):
    with pytest.raises(feed_wire.FeedWireError, match="expected a feed hello"):
        feed_wire.subscriber_of(value)


@pytest.mark.parametrize("value", [[["a"], [0], []], {"a": 1}, [["a"], [0]], ["a", [0], [1]], [["a"], 0, [1]]])
def test_a_step_whose_arrays_do_not_line_up_is_refused(value):
    with pytest.raises(feed_wire.FeedWireError, match="equal lengths"):
        feed_wire.step_of(value)


def test_a_value_larger_than_the_buffer_bound_is_refused_before_it_is_whole():
    reader = feed_wire.unpacker()
    with pytest.raises(msgpack.BufferFull):
        reader.feed(b"\xc6" + (feed_wire.MAX_BUFFER_BYTES * 2).to_bytes(4, "big") + bytes(feed_wire.MAX_BUFFER_BYTES))
