import asyncio

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from services.kv.frames import (HEADER, MAX_FRAME_BYTES, Completion, FrameError, KvFrame, decode_body, read_frame,
                                split_payload)


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def test_split_sizes_add_up():
    frames = split_payload("r", 600_000, frame_bytes=262_144)
    assert [len(f.data) for f in frames] == [262_144, 262_144, 75_712]
    assert {f.of for f in frames} == {3} and [f.seq for f in frames] == [0, 1, 2]


async def test_round_trip_over_a_stream():
    frames = split_payload("req-1", 100_000, frame_bytes=40_000)
    reader = _reader(b"".join(f.encode() for f in frames))
    got = []
    while (frame := await read_frame(reader)) is not None:
        got.append(frame)
    assert [(f.request_id, f.seq, bytes(f.data)) for f in got] == [("req-1", f.seq, bytes(f.data)) for f in frames]


async def test_the_last_frame_carries_the_completion_over_the_wire():
    done = Completion(first_token=128_000, prefill_done_unix=1_764_600_000.25)
    frames = split_payload("req-2", 100_000, frame_bytes=40_000, seqs=range(1, 3), completion=done)
    assert [f.completion for f in frames] == [None, done]  # frame 2 of 3 is the last
    reader = _reader(b"".join(f.encode() for f in frames))
    got = [await read_frame(reader), await read_frame(reader)]
    assert [f.completion for f in got] == [None, done]


async def test_the_last_frame_carries_the_transfers_figures_and_a_missing_first_token():
    done = Completion(first_token=-1, prefill_done_unix=2.5, num_tokens=64, emulated_bytes=8_388_608, real_bytes=8389)
    (frame,) = split_payload("req-4", 8389, completion=done)
    got = await read_frame(_reader(frame.encode()))
    assert got.completion == done and got.completion.has_figures
    assert not Completion(first_token=3, prefill_done_unix=2.5).has_figures


@pytest.mark.parametrize("extra, match", [({"ft": -2, "t": 1.0}, "malformed"), ({"ft": 5}, "malformed"),
                                          ({"ft": 5, "t": 1.0, "n": 4}, "malformed"),
                                          ({"ft": 5, "t": 1.0, "n": 4, "eb": 9, "rb": "x"}, "malformed"),
                                          ({"ft": 5, "t": 1.0, "seq": 0, "of": 2}, "not its last")])
def test_a_bad_completion_is_rejected_and_names_the_request(extra, match):
    fields = {"v": 1, "rid": "req-3", "seq": 0, "of": 1, "crc": 0, "data": b""} | extra
    with pytest.raises(FrameError, match=match) as info:
        decode_body(msgpack.packb(fields))
    assert info.value.request_id == "req-3"


async def test_corrupt_payload_fails_checksum_and_names_request():
    wire = bytearray(KvFrame("req-9", 0, 1, b"x" * 1000).encode())
    wire[-10] ^= 0xFF
    with pytest.raises(FrameError, match="checksum") as info:
        await read_frame(_reader(bytes(wire)))
    assert info.value.request_id == "req-9"


async def test_truncated_frame_is_rejected():
    wire = KvFrame("r", 0, 1, b"y" * 500).encode()
    with pytest.raises(FrameError, match="short"):
        await read_frame(_reader(wire[:-20]))


async def test_oversized_length_rejected_before_reading_body():
    reader = _reader(HEADER.pack(MAX_FRAME_BYTES + 1))  # no body follows: it must not wait for one
    with pytest.raises(FrameError, match="outside"):
        await asyncio.wait_for(read_frame(reader), 1.0)


def test_wrong_types_are_rejected():
    body = msgpack.packb({"v": 1, "rid": 5, "seq": 0, "of": 1, "crc": 0, "data": b""})
    with pytest.raises(FrameError, match="types"):
        decode_body(body)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_give_frame_error_or_frame(data):
    try:
        frame = decode_body(data)
    except FrameError:
        return
    assert isinstance(frame, KvFrame)
