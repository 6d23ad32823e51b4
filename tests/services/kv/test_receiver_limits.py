"""What one peer may hold at a KV receiver: connections, buffered frame bytes, and time."""

from __future__ import annotations

import asyncio
import sys
import tracemalloc

import pytest

from services.kv.frames import HEADER, KvFrame
from services.kv.receiver import KvReceiver, ReceiverLimits
from services.kv.transfers import TransferTable
from tests.services.kv.test_kv_sockets import _free_port, _transfer_completes
from tests.tolerance import assert_at_most
from tests.waiting import WAIT_S, until

FRAME_DATA = 1_000_000  # one frame's payload: its encoding just fits a 1 MiB share
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


async def _peers(port: int, peers: int, size: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(sys.executable, "-c", PEER, str(port), str(peers), str(size),
                                                stdin=asyncio.subprocess.PIPE)


async def _finish(peer: asyncio.subprocess.Process) -> None:
    peer.stdin.write(b"exit\n")
    await asyncio.wait_for(peer.wait(), WAIT_S)


async def test_every_peer_reads_its_frame_within_its_own_share_of_the_budget(receiver):
    share = 1 << 20
    rx, table, port = await receiver(buffer_bytes=PEERS * share, frame_bytes=share, max_connections=PEERS)
    for i in range(PEERS):
        table.announce(f"r{i}", 1, FRAME_DATA, FRAME_DATA * 1000, first_token=1, num_tokens=8)
    tracemalloc.start()
    peer = await _peers(port, PEERS, FRAME_DATA)
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        # Every frame is being read at once, each within its connection's share: none waits for another.
        await until(lambda: rx.connections == PEERS and rx.buffered_bytes > PEERS * FRAME_DATA,
                    "every peer's frame under way")
        peer.stdin.write(b"finish\n")
        for i in range(PEERS):
            assert (await table.wait(f"r{i}", WAIT_S)).received_bytes == FRAME_DATA
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
        await _finish(peer)
    # The frames being read (each briefly twice: the stream buffer and its copy) and each connection's
    # small buffer: the shares bound it, whatever the peers do.
    assert peak < 2 * PEERS * share + PEERS * (256 << 10) + (1 << 20), f"peak {peak} bytes"
    assert rx.buffered_bytes == 0


async def test_peers_holding_every_connection_with_a_frame_one_byte_short_do_not_starve_a_sender(receiver):
    """The attack: every connection holds a frame one byte short of its share. Before the shares, 34
    such 1 MiB frames filled the shared 32 MiB budget and the next transfer waited 118 s."""
    limits = ReceiverLimits()
    share = limits.buffer_bytes // limits.max_connections
    rx, table, port = await receiver()
    start = asyncio.get_running_loop().time()
    await _transfer_completes(table, port, "baseline")
    baseline = asyncio.get_running_loop().time() - start
    peer = await _peers(port, limits.max_connections, share - 100)  # its encoding: about 60 bytes more
    try:
        await until(lambda: rx.connections == limits.max_connections and rx.buffered_bytes > 0,
                    "every connection held")
        start = asyncio.get_running_loop().time()
        await _transfer_completes(table, port, "while-held")
        took = asyncio.get_running_loop().time() - start
        assert rx.buffered_bytes <= limits.buffer_bytes
    finally:
        peer.kill()  # the attacker goes away without finishing its frames
        await asyncio.wait_for(peer.wait(), WAIT_S)
    print(f"a transfer took {baseline:.3f} s alone and {took:.3f} s with every connection held")
    assert_at_most(took, baseline + 1.0, "a transfer's time while every connection is held")
    assert rx.evicted_connections >= 1 and rx.refused_connections == 0
    await until(lambda: rx.connections == 0 and rx.buffered_bytes == 0, "every held connection freed")


@pytest.mark.parametrize("length", [8 << 20, 1 << 20])
async def test_a_frame_longer_than_a_connection_s_share_is_refused_unread(receiver, length):
    rx, table, port = await receiver()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEADER.pack(length - 1) + b"x" * 1000)  # 8 MiB and 1 MiB frames one byte short, as attacks did
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
    writer.close()
    assert rx.bad_frames == 1 and rx.buffered_bytes == 0
    await _transfer_completes(table, port, "after-big-frame")


async def test_connections_past_the_cap_that_find_none_stalled_are_closed_and_the_rest_serve(receiver):
    rx, table, port = await receiver(max_connections=3, evict_after_s=0.3)
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
    await until(lambda: rx.connections == 3, "three connections admitted")

    async def busy(writer: asyncio.StreamWriter) -> None:  # a whole frame every 20 ms: never stalled
        while True:
            writer.write(KvFrame("busy", 0, 1, b"x").encode())
            await asyncio.sleep(0.02)

    senders = [asyncio.create_task(busy(w)) for _, w in held]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # closed once its wait is over
        writer.close()
    finally:
        for task in senders:
            task.cancel()
    assert rx.refused_connections == 1 and rx.evicted_connections == 0
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


def test_frames_that_could_not_all_fit_the_budget_are_refused():
    with pytest.raises(ValueError, match="share is 524288 bytes"):
        ReceiverLimits(frame_bytes=1 << 20, buffer_bytes=32 << 20, max_connections=64)
