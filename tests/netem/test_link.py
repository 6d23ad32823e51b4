"""The userspace link end to end on loopback: bytes, delay, rate, backpressure, teardown."""

import asyncio
import hashlib
import os
import time

import pytest

from netem.config import LinkConfig
from netem.connection import READ_BYTES
from netem.link import UserspaceLink
from tests.netem.servers import WAIT_S, Echo, Recorder, read_all
from tests.tolerance import assert_at_most, assert_close


async def test_listen_address_reports_the_real_port():
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address) as link:
        assert link.listen_address is not None
        assert link.listen_address[1] != 0


async def test_bytes_pass_unchanged_both_ways_on_many_connections():
    payloads = [os.urandom(300_000 + i) for i in range(5)]
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, LinkConfig.symmetric(delay="5ms", jitter="3ms", jitter_dist="normal"), seed=1) as link:

        async def one(payload: bytes) -> bytes:
            reader, writer = await asyncio.open_connection(*link.listen_address)
            writer.write(payload)
            writer.write_eof()
            back = await read_all(reader)
            writer.close()
            return back

        results = await asyncio.gather(*(one(p) for p in payloads))
    assert [hashlib.sha256(r).digest() for r in results] == [hashlib.sha256(p).digest() for p in payloads]


async def test_each_direction_has_its_own_delay():
    config = LinkConfig.model_validate({"up": {"delay": "100ms"}, "down": {"delay": "50ms"}})
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, config) as link:
        reader, writer = await asyncio.open_connection(*link.listen_address)
        writer.write(b"warm")
        await asyncio.wait_for(reader.readexactly(4), WAIT_S)  # connection set up, upstream leg open
        t0 = time.perf_counter()
        writer.write(b"ping")
        await asyncio.wait_for(reader.readexactly(4), WAIT_S)
        rtt = time.perf_counter() - t0
        writer.close()
    assert_close(rtt, 0.150, rel=0.3, what="round trip through 100 ms up + 50 ms down")


async def test_rate_serializes_a_transfer():
    size = 2_000_000
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address, LinkConfig.symmetric(rate="80mbit")) as link:
        _, writer = await asyncio.open_connection(*link.listen_address)
        t0 = time.perf_counter()
        writer.write(os.urandom(size))
        conn = await up.connection()
        await conn.wait_for_bytes(size)
        elapsed = time.perf_counter() - t0
        writer.close()
    assert_close(elapsed, size * 8 / 80e6, rel=0.3, what="2 MB at 80 mbit")


async def test_a_window_bound_connection_does_not_hold_up_another():
    # 64 KiB a 20 ms round trip: 4 MB take about 1.2 s on the first connection; 10 KB on a second one,
    # sent while the first is in its later rounds, cross in about the 10 ms delay, not behind it.
    config = LinkConfig.symmetric(delay="10ms", rate="1gbit", window="64KiB")
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address, config) as link:
        _, big = await asyncio.open_connection(*link.listen_address)
        t0 = time.perf_counter()
        big.write(os.urandom(4_000_000))
        first = await up.connection(0)
        await first.wait_for_bytes(64 * 1024)  # the big transfer is under way
        _, small = await asyncio.open_connection(*link.listen_address)
        t1 = time.perf_counter()
        small.write(os.urandom(10_000))
        await (await up.connection(1)).wait_for_bytes(10_000)
        small_s = time.perf_counter() - t1
        await first.wait_for_bytes(4_000_000)
        big_s = time.perf_counter() - t0
        big.close()
        small.close()
    assert_close(big_s, 4_000_000 / (64 * 1024) * 0.020, rel=0.3, what="4 MB at 64 KiB a round trip")
    assert_at_most(small_s, 0.25, what="10 KB beside it (about the 10 ms delay; behind the big one: about 1 s)")


async def test_a_fast_sender_feels_backpressure():
    queue = 1 << 20
    total = 48 << 20
    config = LinkConfig.symmetric(rate="800mbit", queue=queue)
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address, config) as link:
        _, writer = await asyncio.open_connection(*link.listen_address)
        conn_task = asyncio.ensure_future(up.connection())
        block = os.urandom(1 << 18)
        written, worst = 0, 0
        while written < total:
            writer.write(block)
            await asyncio.wait_for(writer.drain(), WAIT_S)
            written += len(block)
            delivered = len(conn_task.result().data) if conn_task.done() else 0
            worst = max(worst, written - delivered)
        conn = await conn_task
        await conn.wait_for_bytes(total)
        peak = link.stats()["up"]["queue_peak_bytes"]
        writer.close()
    # The link never holds more than its bound plus one read; what is written but
    # not delivered also sits in the kernel's socket buffers, never the whole stream.
    assert_at_most(peak, queue + READ_BYTES, what="bytes held by the link")
    assert_at_most(worst, total / 2, what="bytes written but not yet delivered")


async def test_half_close_lets_the_reply_through():
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, LinkConfig.symmetric(delay="10ms")) as link:
        reader, writer = await asyncio.open_connection(*link.listen_address)
        writer.write(b"question")
        writer.write_eof()
        assert await read_all(reader) == b"question"
        writer.close()


async def test_refused_upstream_resets_the_client():
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    dead = probe.sockets[0].getsockname()[:2]
    probe.close()
    await probe.wait_closed()
    async with UserspaceLink(("127.0.0.1", 0), dead) as link:
        reader, writer = await asyncio.open_connection(*link.listen_address)
        writer.write(b"hello")
        with pytest.raises(ConnectionResetError):
            await read_all(reader)
        writer.close()
        assert link.stats()["up"]["resets"] == 1


async def test_stop_closes_connections_and_leaves_no_tasks():
    async with Recorder() as up:
        link = UserspaceLink(("127.0.0.1", 0), up.address, LinkConfig.symmetric(delay="1s"))
        await link.start()
        reader, writer = await asyncio.open_connection(*link.listen_address)
        writer.write(b"held in the delay line")
        await up.connection()
        await link.stop()
        with pytest.raises(ConnectionError):
            await read_all(reader)
        writer.close()
        assert link.stats()["up"]["connections"] == 0
        assert link.stats()["up"]["queue_bytes"] == 0
        assert not link._tasks
        with pytest.raises(OSError):
            await asyncio.open_connection(*link.listen_address)
