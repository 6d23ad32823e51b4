"""Reconfiguring while bytes flow: nothing lost, nothing reordered."""

import asyncio
import hashlib
import os
import random

from netem.link import UserspaceLink
from tests.netem.servers import WAIT_S, Recorder


async def test_changing_delay_and_rate_mid_transfer_keeps_every_byte_in_order():
    payload = os.urandom(12 << 20)
    rng = random.Random(5)
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address, seed=5) as link:
        _, writer = await asyncio.open_connection(*link.listen_address)
        stop = asyncio.Event()

        async def churn() -> int:
            changes = 0
            while not stop.is_set():
                link.reconfigure({"both": {"delay": f"{rng.uniform(0, 30):.1f}ms", "rate": f"{rng.choice([200, 400, 800])}mbit",
                                           "jitter": f"{rng.uniform(0, 5):.1f}ms"}})
                changes += 1
                try:
                    await asyncio.wait_for(stop.wait(), 0.02)
                except asyncio.TimeoutError:
                    pass
            return changes

        churner = asyncio.ensure_future(churn())
        for i in range(0, len(payload), 1 << 18):
            writer.write(payload[i : i + (1 << 18)])
            await asyncio.wait_for(writer.drain(), WAIT_S)
        conn = await up.connection()
        got = await conn.wait_for_bytes(len(payload), timeout=30)
        stop.set()
        changes = await asyncio.wait_for(churner, WAIT_S)
        writer.close()
        assert link.stats()["up"]["queue_bytes"] == 0
    assert changes >= 5
    assert hashlib.sha256(got).digest() == hashlib.sha256(payload).digest()
