"""What a shaped direction does to its TCP sockets: the segment its listener announces and the receive
buffer of each accepted socket (netem/connection.py `announced_segment`, `shaped_rcvbuf`)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from netem.config import DirectionConfig, LinkConfig
from netem.connection import (MAX_SHAPED_RCVBUF, MIN_SEGMENTS_IN_RCVBUF, MIN_SHAPED_RCVBUF, announced_segment,
                              shaped_rcvbuf)
from netem.link import UserspaceLink
from tests.netem.servers import Echo


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
