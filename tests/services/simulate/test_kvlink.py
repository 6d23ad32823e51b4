"""The virtual KV data plane: the mesh's frames, counted into the receiver's table, timed by a virtual link."""

from __future__ import annotations

import asyncio

import pytest

from netem.config import LinkConfig
from netem.virtual import VirtualLink
from services.kv.frames import Completion, split_payload
from services.kv.transfers import TransferTable
from services.simulate.clock import run_virtual
from services.simulate.kvlink import VirtualKvSender, frame_sizes, frame_wire_bytes
from tests.tolerance import assert_close

LINK = LinkConfig.symmetric(delay="10ms", rate="800mbit", queue="256MiB")


@pytest.mark.parametrize("real_bytes", [0, 1000, 256 * 1024, 3 * 256 * 1024 + 17, 300 * 256 * 1024])
def test_wire_bytes_are_the_encoded_frames(real_bytes):
    rid = "cmpl-0123456789abcdef01234567"
    frames = split_payload(rid, real_bytes)
    assert frame_sizes(real_bytes) == [len(f.data) for f in frames]
    for frame in frames:
        # the CRC is counted as a full uint32; a payload whose CRC fits fewer bytes is a few bytes smaller
        assert 0 <= frame_wire_bytes(rid, frame.seq, frame.of, len(frame.data)) - len(frame.encode()) <= 4
    done = Completion(first_token=127_999, prefill_done_unix=1_764_600_000.5)
    last = split_payload(rid, real_bytes, completion=done)[-1]
    assert last.completion == done
    assert 0 <= frame_wire_bytes(rid, last.seq, last.of, len(last.data), done) - len(last.encode()) <= 4


def _send(real_bytes: int, cancel_at: float | None = None):
    async def body():
        loop = asyncio.get_running_loop()
        table = TransferTable()
        async with VirtualLink(LINK, seed=1) as link:
            sender = VirtualKvSender(link, table)
            table.announce("t1", len(frame_sizes(real_bytes)), real_bytes, real_bytes * 1000, 5, 100)
            cancel = asyncio.Event()
            if cancel_at is not None:
                loop.call_at(cancel_at, cancel.set)
            result = await sender.send("t1", real_bytes, cancel)
            return result, table, loop.time(), sender
    return run_virtual(body())


def test_a_transfer_completes_in_the_table_when_its_last_byte_lands():
    real = 4 * 2**20
    result, table, now, sender = _send(real)
    wire = sum(frame_wire_bytes("t1", seq, 16, size) for seq, size in enumerate(frame_sizes(real)))
    assert_close(now, 0.010 + wire * 8 / 800e6, rel=1e-9, what="delivery on virtual time")
    assert not result.cancelled and result.real_bytes == real and result.frames == 16
    assert table.completed == 1 and table.bytes_received == real and sender.transfers == 1


def test_a_cancelled_transfer_stops_and_never_completes():
    result, table, now, sender = _send(64 * 2**20, cancel_at=0.1)
    assert result.cancelled
    assert_close(now, 0.1, rel=1e-9, what="stop on virtual time")
    assert table.completed == 0 and table.pending == 1 and sender.transfers == 0
