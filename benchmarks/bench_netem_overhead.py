"""Link overhead: unshaped throughput through the link against a plain asyncio relay.

    python benchmarks/bench_netem_overhead.py [--quick]

Both forwarders run on this process's event loop; the traffic (a sender and a
sink, netem.measure.TrafficPeer) runs in another process. The plain relay is
the textbook asyncio Protocol pair: write what you read, pause reading while
the other side's buffer is full. Aims: link / relay >= 0.8 and >= 1 GB/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netem.link import UserspaceLink  # noqa: E402
from netem.measure import TrafficPeer, raise_priority  # noqa: E402


class _Side(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.ready.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.peer.transport.write(data)  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        self.peer.transport.write_eof()  # type: ignore[union-attr]
        return True

    def pause_writing(self) -> None:
        self.peer.transport.pause_reading()  # type: ignore[union-attr]

    def resume_writing(self) -> None:
        self.peer.transport.resume_reading()  # type: ignore[union-attr]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer and self.peer.transport:
            self.peer.transport.close()


class PlainRelay:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> tuple[str, int]:
        self.server = await asyncio.get_running_loop().create_server(self._client, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[:2]

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    def _client(self) -> _Side:
        client = _Side()
        task = asyncio.ensure_future(self._connect(client))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return client

    async def _connect(self, client: _Side) -> None:
        await client.ready
        client.transport.pause_reading()  # type: ignore[union-attr]
        upstream = _Side()
        upstream.peer, client.peer = client, upstream
        await asyncio.get_running_loop().create_connection(lambda: upstream, *self.upstream)
        client.transport.resume_reading()  # type: ignore[union-attr]


async def through(peer: TrafficPeer, kind: str, nbytes: int) -> float:
    if kind == "link":
        async with UserspaceLink(("127.0.0.1", 0), peer.sink_address) as link:
            result = await peer.run("bulk", link.listen_address, nbytes=nbytes)
    else:
        async with PlainRelay(peer.sink_address) as address:
            result = await peer.run("bulk", address, nbytes=nbytes)
    if result["sink"]["bytes"] != nbytes:
        raise RuntimeError(f"{kind}: {result['sink']['bytes']} of {nbytes} bytes arrived")
    return nbytes / (result["sink"]["last_s"] - result["send"]["start_s"])


async def main(quick: bool) -> int:
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; {raise_priority()}")
    nbytes = (512 if quick else 2048) * 2**20
    rounds = 3 if quick else 5
    peer = await TrafficPeer.start()
    rates: dict[str, list[float]] = {"link": [], "relay": []}
    try:
        for _ in range(rounds):  # alternate, so drifting load on the machine hits both alike
            for kind in ("relay", "link"):
                rates[kind].append(await through(peer, kind, nbytes))
    finally:
        await peer.stop()
    link, relay = statistics.median(rates["link"]), statistics.median(rates["relay"])
    print(f"transfer {nbytes / 2**20:.0f} MiB x {rounds} rounds, medians:")
    print(f"  plain asyncio relay: {relay / 1e9:.2f} GB/s  (rounds: {', '.join(f'{r / 1e9:.2f}' for r in rates['relay'])})")
    print(f"  netem link:          {link / 1e9:.2f} GB/s  (rounds: {', '.join(f'{r / 1e9:.2f}' for r in rates['link'])})")
    print(f"  ratio link / relay:  {link / relay:.2f}  (aim >= 0.8); absolute aim >= 1 GB/s")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="512 MiB x 3 instead of 2 GiB x 5")
    sys.exit(asyncio.run(main(parser.parse_args().quick)))
