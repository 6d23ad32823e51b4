"""Messages sharing a line: when each one's last byte arrives, through the real userspace link and the virtual one.

    python -m benchmarks.bench_line_sharing [--repeats 3]

Each case sends messages on connections of their own, each at its own offset from the first send,
through the real link on loopback (`--repeats` runs) and through the virtual link on a virtual loop
(docs/simulate.md, "Transfers sharing a line"). Who gets the line while several messages want it is
what the two must agree on; the last message ends when the line's work is done on both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import dataclass

from netem.config import LinkConfig
from netem.link import UserspaceLink
from netem.virtual import VirtualLink
from services.simulate.clock import run_virtual

WAIT_S = 60.0  # a message through a stalled link; far past every case's line time


@dataclass(frozen=True)
class Case:
    name: str
    size: int
    offsets: tuple[float, ...]
    config: LinkConfig


BYTE_SCALED = LinkConfig.symmetric(rate="10mbit", delay="5ms", queue=67108)  # pdd-mini's WAN in real bytes
CASES = [
    Case("2 x 537 KB, the second 154 ms later", 537_000, (0.0, 0.154), BYTE_SCALED),
    Case("4 x 537 KB at 0, 50, 100, 300 ms", 537_000, (0.0, 0.05, 0.1, 0.3), BYTE_SCALED),
    Case("3 x 2 MB at 0, 30, 50 ms, 100 Mbit/s, 1 MiB queue", 2_000_000, (0.0, 0.03, 0.05),
         LinkConfig.symmetric(rate="100mbit", delay="5ms", queue="1MiB")),
    Case("4 x 200 KB at once, 16 Mbit/s", 200_000, (0.0,) * 4,
         LinkConfig.symmetric(rate="16mbit", delay="5ms", queue="64KiB")),
]


async def _real(case: Case) -> list[float]:
    loop = asyncio.get_running_loop()
    received: list[int] = []
    progress = asyncio.Condition()

    async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(received)
        received.append(0)
        try:
            while data := await reader.read(1 << 20):
                async with progress:
                    received[index] += len(data)
                    progress.notify_all()
        except ConnectionError:
            pass  # the link resets its connections when it stops

    server = await asyncio.start_server(sink, "127.0.0.1", 0)
    async with server, UserspaceLink(("127.0.0.1", 0), server.sockets[0].getsockname()[:2], case.config,
                                     seed=1) as link:
        writers = []
        for index in range(len(case.offsets)):  # open every connection, one byte each, before timing
            _, writer = await asyncio.open_connection(*link.listen_address)
            writer.write(b"x")
            async with progress:
                await asyncio.wait_for(progress.wait_for(lambda: len(received) > index and received[index]), WAIT_S)
            writers.append(writer)
        start = loop.time()

        async def one(index: int) -> float:
            await asyncio.sleep(case.offsets[index])
            writers[index].write(bytes(case.size))
            async with progress:
                await asyncio.wait_for(progress.wait_for(lambda: received[index] > case.size), WAIT_S)
            return loop.time() - start

        ended = await asyncio.gather(*(one(i) for i in range(len(case.offsets))))
        for writer in writers:
            writer.close()
    return ended


async def _virtual(case: Case) -> list[float]:
    loop = asyncio.get_running_loop()
    async with VirtualLink(case.config, seed=1) as link:
        conns = [link.connect() for _ in case.offsets]

        async def one(index: int) -> float:
            await asyncio.sleep(case.offsets[index])
            await conns[index].send("up", case.size)
            return loop.time()

        return await asyncio.gather(*(one(i) for i in range(len(case.offsets))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="real-link runs per case")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; seconds from the first send to each message's last byte")
    print("| case | real link, each message (min-max of runs) | virtual link |")
    print("| --- | --- | --- |")
    for case in CASES:
        runs = [asyncio.run(_real(case)) for _ in range(args.repeats)]
        real = ", ".join(f"{min(r[i] for r in runs):.3f}-{max(r[i] for r in runs):.3f}"
                         for i in range(len(case.offsets)))
        virtual = ", ".join(f"{t:.3f}" for t in run_virtual(_virtual(case)))
        print(f"| {case.name} | {real} | {virtual} |", flush=True)


if __name__ == "__main__":
    main()
