"""msgpack frames that carry KV bytes between instances.

Wire format (docs/mesh.md §Frames): a 4-byte big-endian length, then a msgpack
map {"v", "rid", "seq", "of", "crc", "data"}; the last frame of a transfer also
carries its completion, {"ft", "t", "n", "eb", "rb"}: the first token, when
prefill produced it, and the transfer's tokens, emulated and real bytes. The
length is checked against MAX_FRAME_BYTES before a single payload byte is read,
so a corrupt or hostile peer cannot make the receiver allocate more than that.
The receiver answers each frame with ACK: the count of whole frames it has read.
"""

from __future__ import annotations

import asyncio
import os
import struct
import zlib
from dataclasses import dataclass

import msgpack

VERSION = 1
HEADER = struct.Struct(">I")
# The receiver's one message back: how many whole frames it has read on this connection so far.
# The sender learns what landed, so a broken connection reports only what may be lost, and a
# stopped transfer with nothing before it in flight is cut by a reset (docs/mesh.md §Frames).
ACK = struct.Struct(">Q")
MAX_FRAME_BYTES = 8 * 1024 * 1024
DEFAULT_FRAME_PAYLOAD_BYTES = 256 * 1024

# One random buffer, sliced for every payload: real bytes on the wire without
# paying for os.urandom per transfer. Integrity is checked with CRC32 per frame.
_FILLER = os.urandom(DEFAULT_FRAME_PAYLOAD_BYTES * 4)


class FrameError(ValueError):
    """A frame that is truncated, oversized or fails its checksum."""

    def __init__(self, message: str, request_id: str | None = None):
        super().__init__(message)
        self.request_id = request_id  # set when the frame named its request, so that transfer can fail


@dataclass(frozen=True, slots=True)
class Completion:
    """What the receiver needs beyond the frames: the first token (-1: none, as for a relay's KV after
    a handoff), prefill's end, and the transfer's figures (-1: not carried, an announce gave them).

    It travels in the transfer's last frame, which leaves when the first token is known anyway, so
    no gRPC announce precedes a transfer (docs/mesh.md §Frames, §Transfer time)."""

    first_token: int
    prefill_done_unix: float
    num_tokens: int = -1
    emulated_bytes: int = -1
    real_bytes: int = -1

    @property
    def has_figures(self) -> bool:
        return self.real_bytes >= 0


@dataclass(frozen=True, slots=True)
class KvFrame:
    request_id: str
    seq: int  # 0-based index of this frame within the transfer
    of: int  # number of frames in the transfer
    data: bytes | memoryview
    completion: Completion | None = None  # only on a streamed transfer's last frame

    def encode(self) -> bytes:
        fields = {"v": VERSION, "rid": self.request_id, "seq": self.seq, "of": self.of,
                  "crc": zlib.crc32(self.data), "data": self.data}
        done = self.completion
        if done is not None:
            fields["ft"], fields["t"] = done.first_token, float(done.prefill_done_unix)
            if done.has_figures:
                fields["n"], fields["eb"], fields["rb"] = done.num_tokens, done.emulated_bytes, done.real_bytes
        body = msgpack.packb(fields, use_bin_type=True)
        return HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> KvFrame:
    try:
        fields = msgpack.unpackb(body, raw=False, max_bin_len=MAX_FRAME_BYTES, max_str_len=1024,
                                 max_array_len=16, max_map_len=16)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise FrameError(f"undecodable KV frame: {exc}") from exc
    if not isinstance(fields, dict) or fields.get("v") != VERSION:
        raise FrameError("KV frame is not a version-1 map")
    try:
        rid, seq, of, crc, data = (fields[k] for k in ("rid", "seq", "of", "crc", "data"))
    except KeyError as exc:
        raise FrameError(f"KV frame lacks field {exc}") from exc
    if not (isinstance(rid, str) and isinstance(data, bytes) and all(isinstance(x, int) for x in (seq, of, crc))):
        raise FrameError("KV frame fields have the wrong types")
    if not 0 <= seq < of:
        raise FrameError(f"KV frame index {seq} outside 0..{of - 1}", rid)
    if zlib.crc32(data) != crc:
        raise FrameError(f"KV frame {seq} of request {rid} fails its checksum", rid)
    return KvFrame(rid, seq, of, data, _completion(fields, rid, seq, of))


_FIGURES = ("n", "eb", "rb")


def _completion(fields: dict, rid: str, seq: int, of: int) -> Completion | None:
    if not any(key in fields for key in ("ft", "t", *_FIGURES)):
        return None
    first_token, done = fields.get("ft"), fields.get("t")
    figures = [fields.get(key, -1) for key in _FIGURES]
    carried = [key in fields for key in _FIGURES]
    if not (isinstance(first_token, int) and first_token >= -1 and isinstance(done, float)
            and (all(carried) or not any(carried)) and all(isinstance(x, int) and x >= -1 for x in figures)):
        raise FrameError(f"KV frame {seq} of request {rid} carries a malformed completion", rid)
    if seq != of - 1:
        raise FrameError(f"KV frame {seq} of request {rid} carries a completion but is not its last", rid)
    return Completion(first_token, done, *figures)


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> KvFrame | None:
    """The next frame, or None at a clean end of stream. Raises FrameError on anything else."""
    length = await read_header(reader, max_bytes)
    return None if length is None else await read_body(reader, length)


async def read_header(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> int | None:
    """The next frame's body length, checked against max_bytes; None at a clean end of stream."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise FrameError("stream ended inside a frame header") from exc
        return None
    (length,) = HEADER.unpack(header)
    if length == 0 or length > max_bytes:
        raise FrameError(f"KV frame length {length} outside 1..{max_bytes}")
    return length


async def read_body(reader: asyncio.StreamReader, length: int) -> KvFrame:
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise FrameError(f"stream ended {length - len(exc.partial)} bytes short of a frame") from exc
    return decode_body(body)


def frame_count(real_bytes: int, frame_bytes: int = DEFAULT_FRAME_PAYLOAD_BYTES) -> int:
    """Frames of one transfer of `real_bytes`: at least one, possibly empty."""
    return max(1, -(-real_bytes // frame_bytes))


def split_payload(request_id: str, real_bytes: int, frame_bytes: int = DEFAULT_FRAME_PAYLOAD_BYTES,
                  seqs: range | None = None, completion: Completion | None = None) -> list[KvFrame]:
    """The frames of one transfer of `real_bytes`, or those numbered `seqs` of it (a streamed part);
    `completion` goes with the transfer's last frame."""
    count = frame_count(real_bytes, frame_bytes)
    filler = memoryview(_FILLER)
    frames = []
    for seq in range(count) if seqs is None else seqs:
        size = min(frame_bytes, real_bytes - seq * frame_bytes)
        start = (seq * 7919) % (len(_FILLER) - frame_bytes)  # vary content between frames
        frames.append(KvFrame(request_id, seq, count, bytes(filler[start:start + size]),
                              completion if seq == count - 1 else None))
    return frames
