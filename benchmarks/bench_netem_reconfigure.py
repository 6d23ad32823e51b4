"""Reconfiguration under load: change delay and rate every 100 ms during a long transfer.

    python benchmarks/bench_netem_reconfigure.py [--quick]

A 30 s transfer (5 s with --quick) of a stream whose every 64 KiB carries a
sequence number; the sender and the sink each hash the whole stream. Equal
hashes and byte counts mean no byte was lost, duplicated or reordered while
the link's delay, jitter and rate changed 10 times a second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netem.link import UserspaceLink  # noqa: E402
from netem.measure import TrafficPeer, raise_priority  # noqa: E402

PERIOD_S = 0.1


async def churn(link: UserspaceLink, stop: asyncio.Event, rng: random.Random, log: list[tuple[float, float]]) -> int:
    loop = asyncio.get_running_loop()
    start, changes = loop.time(), 0
    while not stop.is_set():
        rate_mbit = rng.choice([100, 200, 400, 800])  # below what the hashing sender can push
        link.reconfigure({"both": {
            "delay": f"{rng.uniform(0, 50):.2f}ms",
            "jitter": f"{rng.uniform(0, 5):.2f}ms",
            "rate": f"{rate_mbit}mbit",
        }})
        log.append((loop.time(), rate_mbit * 1e6))
        changes += 1
        next_at = start + changes * PERIOD_S  # absolute: the period does not drift
        try:
            await asyncio.wait_for(stop.wait(), max(0.0, next_at - loop.time()))
        except asyncio.TimeoutError:
            pass
    return changes


async def main(quick: bool) -> int:
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; {raise_priority()}")
    duration = 5.0 if quick else 30.0
    peer = await TrafficPeer.start()
    try:
        async with UserspaceLink(("127.0.0.1", 0), peer.sink_address, seed=1) as link:
            stop = asyncio.Event()
            log: list[tuple[float, float]] = []
            churner = asyncio.ensure_future(churn(link, stop, random.Random(1), log))
            result = await peer.run("bulk", link.listen_address, duration=duration, hashing=True)
            stop.set()
            changes = await churner
            stats = link.stats()["up"]
    finally:
        await peer.stop()
    sent, got = result["send"], result["sink"]
    same = sent["sha256"] == got["sha256"] and sent["sent"] == got["bytes"]
    print(f"{duration:.0f} s transfer, {changes} reconfigurations (every {PERIOD_S * 1e3:.0f} ms): "
          f"sent {sent['sent']} B, received {got['bytes']} B, "
          f"mean {got['bytes'] * 8 / (got['last_s'] - sent['start_s']) / 1e6:.0f} Mbit/s")
    print(f"  stream sha256 sender {sent['sha256'][:16]}... sink {got['sha256'][:16]}...: "
          f"{'identical: 0 bytes lost or reordered' if same else 'DIFFERENT'}")
    print(f"  link held at most {stats['queue_peak_bytes'] / 2**20:.1f} MiB; queue now {stats['queue_bytes']} B")
    # While the sender outpaces the line the queue stays full, so the bytes
    # delivered should match the line capacity integrated over the rate log.
    end = got["last_s"]
    capacity = sum(rate * (min(t_next, end) - t) for (t, rate), (t_next, _) in zip(log, [*log[1:], (end, 0.0)])
                   if t < end) / 8
    busy_until = log[-1][0] if log else end
    print(f"  bytes delivered / line capacity while the rate changed: "
          f"{got['bytes'] / capacity:.3f} (1.0 if every new rate took effect at once; the queue drains "
          f"{max(0.0, end - busy_until):.2f} s after the last change)")
    print("PASS" if same else "FAIL")
    return 0 if same else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 5 s transfer instead of 30 s")
    sys.exit(asyncio.run(main(parser.parse_args().quick)))
