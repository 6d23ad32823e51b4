"""The KV frame decoder against structured garbage: a FrameError or a frame that checks out, nothing else.

Plain random bytes rarely get past msgpack's first byte, so these build msgpack values of every
type (maps with odd keys, nested arrays, ext types, huge ints), near-valid frames with one field
changed, and valid frames with bytes flipped, on the stream as the receiver reads it.
"""

from __future__ import annotations

import asyncio
import zlib

import msgpack
from hypothesis import HealthCheck, given, settings, strategies as st

from services.kv.frames import HEADER, FrameError, KvFrame, decode_body, read_frame

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.integers(-2**64, 2**64 - 1) | st.floats() | st.text(max_size=20)
           | st.binary(max_size=64) | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=16)))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=4), max_leaves=10)
FIELDS = ("v", "rid", "seq", "of", "crc", "data")


def _valid(rid: str, seq: int, of: int, data: bytes) -> dict:
    return {"v": 1, "rid": rid, "seq": seq, "of": of, "crc": zlib.crc32(data), "data": data}


def _check(body: bytes) -> None:
    try:
        frame = decode_body(body)
    except FrameError:
        return
    # Anything accepted is a frame the receiver can file: typed fields, index in range, checksum right.
    assert isinstance(frame, KvFrame) and isinstance(frame.request_id, str)
    assert 0 <= frame.seq < frame.of and isinstance(frame.data, bytes)


def _pack(value) -> bytes | None:
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (OverflowError, TypeError, ValueError):
        return None  # not representable in msgpack at all: nothing a peer could send


@FUZZ
@given(value=values)
def test_any_msgpack_value_is_a_frame_error_or_a_frame(value):
    body = _pack(value)
    if body is not None:
        _check(body)


@FUZZ
@given(length=st.integers(0, 20), payload=st.binary(max_size=20), wrap=st.booleans())
def test_timestamps_and_other_reserved_ext_types_are_a_frame_error_or_a_frame(length, payload, wrap):
    # Type -1 is msgpack's timestamp: a payload of the wrong length makes the unpacker itself fail.
    ext = b"\xc7" + bytes([length]) + b"\xff" + payload[:length].ljust(length, b"\0")
    _check(b"\x81\xa4data" + ext if wrap else ext)


@FUZZ
@given(field=st.sampled_from(FIELDS + ("extra",)), replacement=values, drop=st.booleans(),
       data=st.binary(max_size=64), seq=st.integers(0, 3), of=st.integers(1, 4))
def test_a_frame_with_one_field_wrong_or_missing_is_refused_or_consistent(field, replacement, drop, data, seq, of):
    fields = _valid("req-1", seq, of, data)
    if drop:
        fields.pop(field, None)
    else:
        fields[field] = replacement
    body = _pack(fields)
    if body is not None:
        _check(body)


@FUZZ
@given(data=st.binary(min_size=1, max_size=256), flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)),
                                                               min_size=1, max_size=4))
def test_flipped_bytes_in_a_valid_frame_never_pass_as_another_payload(data, flips):
    body = bytearray(msgpack.packb(_valid("req-1", 0, 1, data), use_bin_type=True))
    for at, mask in flips:
        body[at % len(body)] ^= mask
    try:
        frame = decode_body(bytes(body))
    except FrameError:
        return
    assert zlib.crc32(frame.data) == msgpack.unpackb(bytes(body), raw=False)["crc"]


@FUZZ
@given(pieces=st.lists(st.binary(max_size=64) | st.builds(lambda d: HEADER.pack(len(d)) + d, st.binary(max_size=64))
                       | st.just(HEADER.pack(2**32 - 1)) | st.just(HEADER.pack(0)), max_size=6))
def test_a_stream_of_frames_and_garbage_reads_as_frames_then_an_error_or_its_end(pieces):
    async def read_all() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"".join(pieces))
        reader.feed_eof()
        for _ in range(len(pieces) + 1):
            try:
                frame = await asyncio.wait_for(read_frame(reader), 5)
            except FrameError:
                return
            if frame is None:
                return
            assert isinstance(frame, KvFrame)
        raise AssertionError("more frames than pieces")

    asyncio.run(read_all())
