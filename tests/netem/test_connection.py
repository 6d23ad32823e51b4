"""What a shaped direction does to its TCP sockets: the segment its listener announces and the receive
buffer of each accepted socket (netem/connection.py `announced_segment`, `shaped_rcvbuf`)."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from netem.config import DirectionConfig, LinkConfig
from netem.connection import (MAX_SHAPED_RCVBUF, MIN_SEGMENTS_IN_RCVBUF, MIN_SHAPED_RCVBUF, announced_segment,
                              shaped_rcvbuf)
from netem.link import SO_BUF_LOCK, UserspaceLink
from tests.netem.servers import Echo
from tests.tolerance import assert_at_least


@pytest.fixture
def loopback_pair():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname(), timeout=5)
    accepted, _ = server.accept()
    yield accepted
    for sock in (accepted, client, server):
        sock.close()


def test_a_small_queue_still_leaves_room_for_a_few_segments(loopback_pair):
    # Loopback's segment is tens of KiB: half of a 64 KiB queue would hold less than one, and the
    # window would sit at zero until the sender's persist timer probed it.
    segment = loopback_pair.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    assert segment > 16 * 1024
    size = shaped_rcvbuf(64 * 1024, loopback_pair)
    assert size >= MIN_SEGMENTS_IN_RCVBUF * segment > 32 * 1024


def test_a_large_queue_gets_half_of_it_up_to_the_cap(loopback_pair):
    assert shaped_rcvbuf(2 * 2**20, loopback_pair) == 2**20
    assert shaped_rcvbuf(64 * 2**20, loopback_pair) == MAX_SHAPED_RCVBUF


def test_a_socket_without_tcp_segments_gets_half_the_queue_or_the_floor():
    left, right = socket.socketpair()
    try:
        assert shaped_rcvbuf(64 * 1024, left) == 32 * 1024
        assert shaped_rcvbuf(1024, left) == MIN_SHAPED_RCVBUF
    finally:
        left.close()
        right.close()


def test_a_small_shaped_queue_announces_a_segment_that_half_of_it_holds_four_times():
    small = DirectionConfig(rate="10mbit", queue="64KiB")
    assert MIN_SEGMENTS_IN_RCVBUF * announced_segment(small) <= small.queue_bytes // 2
    assert announced_segment(DirectionConfig(rate="10mbit", queue="64MiB")) is None  # loopback's own fits
    assert announced_segment(DirectionConfig(queue="64KiB")) is None  # unshaped: nothing waits on its window


async def test_a_client_of_a_link_with_a_small_queue_sends_segments_that_fit_its_window():
    config = LinkConfig.symmetric(rate="10mbit", queue="64KiB")
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, config) as link:
        reader, writer = await asyncio.open_connection(*link.listen_address)
        try:
            sock = writer.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG) <= announced_segment(config.up)
        finally:
            writer.close()


# struct tcp_info only grows (linux/tcp.h); tcpi_snd_wnd, the window the peer last announced, is a u32
# at this offset since Linux 5.4.
TCPI_SND_WND_OFFSET = 228
SO_RCVBUF_LOCKED = 2  # SOCK_RCVBUF_LOCK in SO_BUF_LOCK's bits (linux/sock.h)


async def test_a_client_of_a_shaped_link_is_announced_no_more_window_than_the_links_buffer_holds():
    # The client connects and may write before the link's loop has accepted it. Were the buffer set only
    # on the accepted socket, the handshake would have announced the default buffer's window (64 KiB),
    # the bytes past the smaller buffer would be dropped, and the client would wait out a 200 ms
    # retransmission timeout: the first KV transfers of a fresh mesh took 0.2-0.5 s longer.
    config = LinkConfig.symmetric(rate="10mbit", queue="64KiB")
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, config) as link:
        with socket.create_connection(link.listen_address, timeout=5) as client:  # the link's loop waits
            info = client.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 512)
            if len(info) < TCPI_SND_WND_OFFSET + 4:
                pytest.skip("this kernel's tcp_info has no tcpi_snd_wnd (Linux 5.4+)")
            (window,) = struct.unpack_from("I", info, TCPI_SND_WND_OFFSET)
    assert 0 < window <= config.up.queue_bytes // 2


async def test_a_link_made_unshaped_gives_its_next_connections_the_kernels_own_buffers_and_segment():
    # A buffer once set is locked: a link switched to no rate (the kernel taking the shaping over,
    # services/launcher/link_host.py) must not leave its next connections the last shaped buffer, which
    # would cap their window; shaped again, the listener holds the shaped one again.
    config = LinkConfig.symmetric(rate="10mbit", queue="64KiB")
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, config) as link:
        (listener,) = link._server.sockets  # what every accepted socket inherits
        link.reconfigure({"both": {"rate": None}})
        unshaped = (listener.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK),
                    listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG))
        link.reconfigure(config)
        shaped = (listener.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK),
                  listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG),
                  listener.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
    assert unshaped[0] == 0 and unshaped[1] != announced_segment(config.up)
    segment = announced_segment(config.up)
    assert shaped == (SO_RCVBUF_LOCKED, segment, 2 * shaped_rcvbuf(config.up.queue_bytes, listener, segment))


async def test_connections_ready_together_share_the_line_read_by_read():
    # Four senders, one message each, through a 16 Mbit/s line with a 64 KiB queue: 98 ms of line time
    # apiece. Served one connection at a time they would end near 0.1, 0.2, 0.3 and 0.4 s; sharing the
    # line read by read, they end together near the 0.4 s the four take.
    size, senders = 192 * 1024, 4
    ended: list[float] = []
    all_ended = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def receive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(size)
        ended.append(loop.time())
        if len(ended) == senders:
            all_ended.set()
        writer.close()

    server = await asyncio.start_server(receive, "127.0.0.1", 0)
    config = LinkConfig.symmetric(rate="16mbit", queue="64KiB")
    async with server, UserspaceLink(("127.0.0.1", 0), server.sockets[0].getsockname()[:2], config, seed=1) as link:
        writers = [(await asyncio.open_connection(*link.listen_address))[1] for _ in range(senders)]
        start = loop.time()
        for writer in writers:
            writer.write(bytes(size))
        await asyncio.wait_for(all_ended.wait(), 10)
        for writer in writers:
            writer.close()
    first, last = min(ended) - start, max(ended) - start
    assert_at_least(first, 0.6 * last, "the first message's time against the last's")
