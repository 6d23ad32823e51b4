"""Loss on a live link costs retransmission stalls, never bytes."""

import asyncio
import os
import time

from netem.config import LinkConfig
from netem.link import UserspaceLink
from tests.netem.servers import Recorder
from tests.tolerance import assert_at_least, assert_close


async def test_each_lost_unit_stalls_the_stream_and_no_byte_is_lost():
    config = LinkConfig.model_validate({"up": {"loss": 1.0, "loss_unit": "64KiB", "loss_stall": "100ms"}})
    payload = os.urandom(4 * 65536)
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address, config, seed=3) as link:
        _, writer = await asyncio.open_connection(*link.listen_address)
        t0 = time.perf_counter()
        writer.write(payload)
        conn = await up.connection()
        got = await conn.wait_for_bytes(len(payload))
        elapsed = time.perf_counter() - t0
        stalls = link.stats()["up"]["loss_stalls"]
        writer.close()
    assert got == payload
    assert stalls == 4
    # How the reads split the stream decides which stalls overlap, so only the
    # first is certain; with one read all four add up.
    assert_at_least(elapsed, 0.1 * 0.9, what="one stall at least")
    assert_close(elapsed, 0.25, rel=0.7, what="stalled transfer")
