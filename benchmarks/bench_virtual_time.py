"""How fast virtual time runs, and how closely the virtual link tracks the real one.

    python -m benchmarks.bench_virtual_time [--seconds 60]

Three measurements, printed with the machine's load (docs/simulate.md, "Measured"):
1. the clock: 30,000 sleeps spread over ten emulated hours, against the stock loop;
2. the article's KV case: missed-suffix KV of a 64K-context, seven-bin-hit workload at
   80 req/s over one 20 Gbit/s line, for --seconds of arrivals: emulated seconds per wall second;
3. the same message sizes through the real userspace link on loopback and the virtual link:
   the ratio of real to virtual delivery time, per size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time

from netem.config import LinkConfig
from netem.link import UserspaceLink
from netem.virtual import VirtualLink
from services.profiles import load_model
from services.simulate.clock import run_virtual
from services.simulate.kv_case import kv_messages, transfer_all

WAN = LinkConfig.symmetric(rate="20gbit", delay="10ms", queue="4GiB")
LOOPBACK = LinkConfig.symmetric(delay="15ms", rate="400mbit", queue="8MiB")
SIZES = [250_000, 1_000_000, 4_000_000, 16_000_000]


async def _sleep_all(delays: list[float]) -> None:
    await asyncio.gather(*(asyncio.sleep(d) for d in delays))


def bench_clock(count: int = 30_000) -> None:
    """The same sleeps on the virtual loop (over ten hours) and on the stock loop (squeezed into 1 s)."""
    rng = random.Random(1)
    delays = [rng.uniform(0, 36_000.0) for _ in range(count)]
    started = time.perf_counter()
    run_virtual(_sleep_all(delays))
    virtual = time.perf_counter() - started
    started = time.perf_counter()
    asyncio.run(_sleep_all([d / 36_000.0 for d in delays]))
    stock = time.perf_counter() - started
    print(f"clock: {count:,} sleeps over 36,000 emulated s in {virtual:.2f} s wall ({36_000 / virtual:,.0f}x real "
          f"time, {virtual / count * 1e6:.0f} us per timer); the stock loop takes {stock:.2f} s for the same "
          f"sleeps within 1 s (virtual / stock wall: {virtual / stock:.2f})")


def bench_kv_case(seconds: float) -> None:
    messages = kv_messages(random.Random(3), 80.0, int(80 * seconds), load_model("pdd-paper").kv_bytes_per_token)

    async def main() -> tuple[list[float], int]:
        async with VirtualLink(WAN, seed=1) as link:
            return await transfer_all(link, messages), link.stats()["up"]["chunks"]

    started = time.perf_counter()
    took, pieces = run_virtual(main())
    wall = time.perf_counter() - started
    took.sort()
    emulated = messages[-1][0]
    print(f"kv case: {len(messages)} messages, {sum(n for _, n in messages) / 1e9:.1f} GB, {emulated:.0f} s of "
          f"arrivals in {wall:.2f} s wall ({emulated / wall:,.0f}x real time), {pieces:,} line pieces; transfer "
          f"p50 {took[len(took) // 2]:.3f} s, p99 {took[int(len(took) * 0.99)]:.3f} s, max {took[-1]:.3f} s")


async def _real_link(repeats: int) -> list[list[float]]:
    loop = asyncio.get_running_loop()
    received = 0
    changed = asyncio.Event()

    async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal received
        try:
            while data := await reader.read(1 << 20):
                received += len(data)
                changed.set()
        except ConnectionError:
            pass  # the link resets its connections when it stops

    server = await asyncio.start_server(sink, "127.0.0.1", 0)
    out = []
    async with UserspaceLink(("127.0.0.1", 0), server.sockets[0].getsockname()[:2], LOOPBACK, seed=1) as link:
        _, writer = await asyncio.open_connection(*link.listen_address)
        for size in SIZES:
            runs = []
            for _ in range(repeats):
                target, start = received + size, loop.time()
                writer.write(bytes(size))
                while received < target:
                    changed.clear()
                    await asyncio.wait_for(changed.wait(), 30.0)
                runs.append(loop.time() - start)
            out.append(runs)
        writer.close()
    server.close()
    return out


async def _virtual_link() -> list[float]:
    loop = asyncio.get_running_loop()
    async with VirtualLink(LOOPBACK, seed=1) as link:
        conn, out = link.connect(), []
        for size in SIZES:
            start = loop.time()
            await conn.send("up", size)
            out.append(loop.time() - start)
        return out


def bench_against_real(repeats: int) -> None:
    real = asyncio.run(_real_link(repeats))
    virtual = run_virtual(_virtual_link())
    for size, runs, v in zip(SIZES, real, virtual):
        ratios = sorted(r / v for r in runs)
        print(f"real/virtual, {size / 1e6:5.2f} MB at 400 Mbit/s + 15 ms: virtual {v * 1e3:7.2f} ms, "
              f"real median {ratios[len(ratios) // 2]:.3f}x, worst {ratios[-1]:.3f}x of {repeats}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of KV arrivals")
    parser.add_argument("--repeats", type=int, default=5, help="real-link runs per message size")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {len(os.sched_getaffinity(0))} cores")
    bench_clock()
    bench_kv_case(args.seconds)
    bench_against_real(args.repeats)


if __name__ == "__main__":
    main()
