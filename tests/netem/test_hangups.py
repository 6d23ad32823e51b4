"""A client's reset reaches the link while the link has paused reading it: the connection is reset
at once and its queued bytes never cross the line (netem/hangups.py)."""

import asyncio
from netem.config import LinkConfig
from netem.connection import abort_with_reset
from netem.link import UserspaceLink
from tests.netem.servers import WAIT_S, Recorder
from tests.waiting import until

QUEUE = 64 * 1024
# 8 kbit/s: the queue alone would take 65 s to drain, far past WAIT_S.
SLOW = LinkConfig.model_validate({"up": {"rate": "8kbit", "queue": QUEUE}})


async def _backed_up_client(link: UserspaceLink) -> asyncio.StreamWriter:
    """A client whose writes the link has stopped reading: the queue is full, the kernel's buffers too."""
    _, writer = await asyncio.open_connection(*link.listen_address)
    writer.write(b"x" * (4 * 2**20))
    await until(lambda: link.stats()["up"]["reading_paused"] and writer.transport.get_write_buffer_size(),
                "the link paused reading a backed-up client")
    return writer


async def test_a_reset_from_a_paused_client_resets_the_connection_and_drops_its_queue():
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address, SLOW) as link:
        writer = await _backed_up_client(link)
        conn = await up.connection()
        abort_with_reset(writer.transport)
        await asyncio.wait_for(conn.eof.wait(), WAIT_S)  # the upstream leg is reset too
        stats = link.stats()["up"]
        assert stats["resets"] == 1 and stats["queue_bytes"] == 0
        assert len(conn.data) < QUEUE  # what crossed before the reset: the queue did not drain


async def test_a_paused_client_that_ends_in_order_still_delivers_what_it_wrote():
    fast = LinkConfig.model_validate({"up": {"rate": "20mbit", "queue": QUEUE}})
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address, fast) as link:
        writer = await _backed_up_client(link)
        writer.write_eof()  # FIN behind the queued bytes, then the socket closes
        writer.close()
        conn = await up.connection()
        await asyncio.wait_for(conn.eof.wait(), WAIT_S)
        assert len(conn.data) == 4 * 2**20 and link.stats()["up"]["resets"] == 0
