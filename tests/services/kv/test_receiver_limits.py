"""What one peer may hold at a KV receiver: connections, buffered frame bytes, and time."""

from __future__ import annotations

import asyncio
import sys
import tracemalloc

import pytest

from services.kv.frames import HEADER
from services.kv.receiver import KvReceiver, ReceiverLimits, TransferTable
from tests.services.kv.test_kv_sockets import _free_port, _transfer_completes
from tests.waiting import WAIT_S, until

FRAME_DATA = 1_000_000  # one frame's payload: its encoding just fits the 1 MiB per-connection cap
PEERS = 16

@pytest.fixture
async def receiver():
    made: list[KvReceiver] = []

    async def start(**limits) -> tuple[KvReceiver, TransferTable, int]:
        table, port = TransferTable(), _free_port()
        rx = KvReceiver(table, "127.0.0.1", port, ReceiverLimits(**limits))
        await rx.start()
        made.append(rx)
        return rx, table, port

    yield start
    for rx in made:
        await rx.stop()


# The peers run in their own process, so that only the receiver's buffers are counted here: each
# thread sends its whole frame but the last byte, and the last byte once told to on stdin.
PEER = """
import socket, sys, threading
from services.kv.frames import KvFrame
port, peers, size = (int(a) for a in sys.argv[1:4])
frames = [KvFrame(f"r{i}", 0, 1, bytes([i]) * size).encode() for i in range(peers)]
socks = [socket.create_connection(("127.0.0.1", port)) for _ in frames]
threads = [threading.Thread(target=s.sendall, args=(f[:-1],)) for s, f in zip(socks, frames)]
for t in threads: t.start()
sys.stdin.readline()
for t in threads: t.join()
for s, f in zip(socks, frames): s.sendall(f[-1:])
sys.stdin.readline()
"""


async def test_frames_of_many_peers_are_read_within_the_total_buffer_budget(receiver):
    budget = 2 * (1 << 20)
    rx, table, port = await receiver(buffer_bytes=budget, frame_bytes=1 << 20)
    for i in range(PEERS):
        table.announce(f"r{i}", 1, FRAME_DATA, FRAME_DATA * 1000, first_token=1, num_tokens=8)
    tracemalloc.start()
    peer = await asyncio.create_subprocess_exec(sys.executable, "-c", PEER, str(port), str(PEERS), str(FRAME_DATA),
                                                stdin=asyncio.subprocess.PIPE)
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        await until(lambda: rx.connections == PEERS and rx.buffered_bytes + (1 << 20) > budget,
                     "every peer connected and the budget filled")
        peer.stdin.write(b"finish\n")
        for i in range(PEERS):
            assert (await table.wait(f"r{i}", WAIT_S)).received_bytes == FRAME_DATA
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
        peer.stdin.write(b"exit\n")
        await asyncio.wait_for(peer.wait(), WAIT_S)
    # Without the budget every peer's frame would sit here at once (16 MB); with it, the frames being
    # read (each briefly twice: the stream buffer and its copy) and each connection's small buffer.
    assert peak < 2 * budget + PEERS * (256 << 10) + (1 << 20), f"peak {peak} bytes"
    assert rx.buffered_bytes == 0


async def test_a_frame_longer_than_the_per_connection_cap_is_refused_unread(receiver):
    rx, table, port = await receiver(frame_bytes=1 << 20)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEADER.pack(8 * 2**20 - 1) + b"x" * 1000)  # an 8 MiB frame, one byte short, as the attack did
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
    writer.close()
    assert rx.bad_frames == 1 and rx.buffered_bytes == 0
    await _transfer_completes(table, port, "after-big-frame")


async def test_connections_past_the_cap_are_closed_and_the_rest_serve(receiver):
    rx, table, port = await receiver(max_connections=3)
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
    await until(lambda: rx.connections == 3, "three connections admitted")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # closed at once
    writer.close()
    assert rx.refused_connections == 1
    for _, w in held:
        w.close()
    await until(lambda: rx.connections == 0, "the held connections closed")
    await _transfer_completes(table, port, "after-cap")


async def test_an_idle_connection_and_a_stalled_frame_are_closed_at_their_deadlines(receiver):
    rx, table, port = await receiver(idle_s=0.2, frame_read_s=0.3)
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    stalled_reader, stalled_writer = await asyncio.open_connection("127.0.0.1", port)
    stalled_writer.write(HEADER.pack(1000) + b"x" * 10)  # a frame begun, never finished
    for reader in (idle_reader, stalled_reader):
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
    idle_writer.close()
    stalled_writer.close()
    await until(lambda: rx.connections == 0 and rx.buffered_bytes == 0, "both freed")
    await _transfer_completes(table, port, "after-deadlines")


def test_a_frame_cap_above_the_total_budget_is_refused():
    with pytest.raises(ValueError, match="budget"):
        ReceiverLimits(frame_bytes=64 << 20, buffer_bytes=32 << 20)
