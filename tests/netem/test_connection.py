"""The receive buffer a shaped direction gives its accepted sockets (netem/connection.py `shaped_rcvbuf`)."""

from __future__ import annotations

import socket

import pytest

from netem.connection import MAX_SHAPED_RCVBUF, MIN_SEGMENTS_IN_RCVBUF, MIN_SHAPED_RCVBUF, shaped_rcvbuf


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
