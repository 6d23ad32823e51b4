"""The token feed's wire: msgpack values on a plain TCP stream, one per engine step.

A gRPC stream message costs each end about 0.35 ms more than the same bytes on a bare
TCP stream, spaced as engine steps are (its poller thread wakes, then the event loop:
benchmarks/bench_feed_message.py, docs/mesh.md §Token feed), and a mini preset sends
over a hundred a second. So a decode service serves its feed on a port of its own:

    subscriber -> service:  {"v": 1, "subscriber": NAME}          once, on connecting
    service -> subscriber:  [request_ids, positions, tokens]       one per step

msgpack values delimit themselves, so there is no length prefix; a reader bounds its
buffer instead (MAX_BUFFER_BYTES). The service sends an empty step as soon as the feed
is open, and again after every HEARTBEAT_S without a step, so a subscriber can tell a
quiet feed from a dead one: nothing for SILENT_S and it hangs up (gRPC's keepalive on the
control channels pings every 10 s, services/rpc/__init__.py).
"""

from __future__ import annotations

import msgpack

VERSION = 1
HEARTBEAT_S = 2.0
SILENT_S = 10.0
HELLO_S = 5.0  # a subscriber names itself within this, or the service hangs up
CONNECT_S = 5.0
STALLED_S = 10.0  # a subscriber that reads nothing this long with a full buffer is cut off
MAX_BUFFER_BYTES = 4 * 1024 * 1024  # a step of every stream of a big instance is tens of KiB
EMPTY_STEP = msgpack.packb(([], [], []))

_pack = msgpack.Packer().pack


class FeedWireError(ValueError):
    """A value on the feed that is not what the wire says."""


def hello(subscriber: str) -> bytes:
    return msgpack.packb({"v": VERSION, "subscriber": subscriber})


def subscriber_of(value: object) -> str:
    if not isinstance(value, dict) or value.get("v") != VERSION or not isinstance(value.get("subscriber"), str):
        raise FeedWireError(f"expected a feed hello {{'v': {VERSION}, 'subscriber': NAME}}, got {value!r:.200}")
    return value["subscriber"]


def step(request_ids: list[str], positions: list[int], tokens: list[int]) -> bytes:
    return _pack((request_ids, positions, tokens))


def unpacker() -> msgpack.Unpacker:
    """A reader of feed values; BufferFull when one would not fit MAX_BUFFER_BYTES."""
    return msgpack.Unpacker(max_buffer_size=MAX_BUFFER_BYTES, use_list=True, raw=False)


def step_of(value: object) -> tuple[list, list, list]:
    if (type(value) is not list or len(value) != 3 or any(type(part) is not list for part in value)
            or not len(value[0]) == len(value[1]) == len(value[2])):
        raise FeedWireError(f"expected a step [request_ids, positions, tokens] of equal lengths, got {value!r:.200}")
    return value
