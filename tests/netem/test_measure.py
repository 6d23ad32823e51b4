"""The benchmarks' traffic peer: a hashed bulk stream and timed records through a link."""

import asyncio

from netem.config import LinkConfig
from netem.link import UserspaceLink
from netem.measure import TrafficPeer
from tests.tolerance import assert_close

WAIT_S = 30.0


async def test_bulk_stream_hashes_match_and_records_carry_their_delay():
    peer = await asyncio.wait_for(TrafficPeer.start(), WAIT_S)
    try:
        async with UserspaceLink(("127.0.0.1", 0), peer.sink_address, LinkConfig.symmetric(delay="30ms")) as link:
            bulk = await asyncio.wait_for(peer.run("bulk", link.listen_address, nbytes=3 << 20, hashing=True), WAIT_S)
            records = await asyncio.wait_for(
                peer.run("records", link.listen_address, count=20, gap=0.002, connections=4), WAIT_S)
    finally:
        await peer.stop()
    assert bulk["sink"]["bytes"] == bulk["send"]["sent"] == 3 << 20
    assert bulk["sink"]["sha256"] == bulk["send"]["sha256"]
    delays = records["sink"]["delays_s"]
    assert len(delays) == 20
    assert_close(sorted(delays)[10], 0.030, rel=0.3, what="median one-way delay of a record")
