"""Partitions on a live link: a blackhole holds bytes and delivers them after; reject resets."""

import asyncio
import time

import pytest

from netem.link import UserspaceLink
from tests.netem.servers import WAIT_S, Echo, Recorder, read_all
from tests.tolerance import assert_at_least


async def test_blackhole_holds_data_then_delivers_it():
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address) as link:
        _, writer = await asyncio.open_connection(*link.listen_address)
        writer.write(b"a")
        conn = await up.connection()
        await conn.wait_for_bytes(1)
        link.partition("blackhole", "up", duration=0.4)
        t0 = time.perf_counter()
        writer.write(b"held")
        with pytest.raises(asyncio.TimeoutError):
            await conn.wait_for_bytes(5, timeout=0.2)  # nothing crosses while the partition lasts
        assert link.stats()["up"]["partition"] == "blackhole"
        assert await conn.wait_for_bytes(5) == b"aheld"
        assert_at_least(time.perf_counter() - t0, 0.4 * 0.9, what="bytes held by the blackhole")
        writer.close()


async def test_blackhole_without_duration_lasts_until_healed_and_is_one_way():
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address) as link:
        reader, writer = await asyncio.open_connection(*link.listen_address)
        writer.write(b"x")
        await asyncio.wait_for(reader.readexactly(1), WAIT_S)
        link.partition("blackhole", "down")  # replies are held, requests still reach the echo
        writer.write(b"y")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.readexactly(1), 0.2)
        assert link.stats()["down"]["queue_bytes"] == 1
        link.heal("down")
        assert await asyncio.wait_for(reader.readexactly(1), WAIT_S) == b"y"
        writer.close()


async def test_reject_resets_open_connections_and_refuses_new_ones_for_its_duration():
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address) as link:
        reader, writer = await asyncio.open_connection(*link.listen_address)
        writer.write(b"x")
        await asyncio.wait_for(reader.readexactly(1), WAIT_S)
        link.partition("reject", "both", duration=0.5)
        with pytest.raises(ConnectionResetError):
            await read_all(reader)
        writer.close()

        reader2, writer2 = await asyncio.open_connection(*link.listen_address)
        with pytest.raises(ConnectionResetError):
            await read_all(reader2)
        writer2.close()

        link.heal()
        reader3, writer3 = await asyncio.open_connection(*link.listen_address)
        writer3.write(b"back")
        writer3.write_eof()
        assert await read_all(reader3) == b"back"
        writer3.close()
        assert link.stats()["up"]["resets"] >= 2
