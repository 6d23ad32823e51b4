"""What the live page costs the router: CPU and event-loop lag, unwatched and watched, and its data's size.

On an idle pdd-mini mesh, three phases of `--seconds` each: nobody watching, one viewer, and `--viewers`
viewers, each asking for /dashboard/data?since=LAST once a second as the page does. For each: the router
process's CPU (utime + stime from /proc) per second of wall time, its event-loop lag p99 (/stats), and the
data answers' mean time and size. Then the whole history's answer (since=0), and its size per sample.

    .venv/bin/python -m benchmarks.bench_dashboard [--seconds 20] [--viewers 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import aiohttp

from benchmarks.meshctl import mesh, service_stats
from services.launcher.processes import keeper_status

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S  # utime, stime


async def viewer(http: aiohttp.ClientSession, url: str, until: float, answers: list[tuple[float, int]]) -> None:
    since = 0
    while time.monotonic() < until:
        started = time.perf_counter()
        async with http.get(f"{url}/dashboard/data", params={"since": str(since)}) as reply:
            body = await reply.read()
        answers.append((time.perf_counter() - started, len(body)))
        since = json.loads(body)["now"]["seq"]
        await asyncio.sleep(1.0)  # the page's own pace: one read a second


async def phase(http, url, plan, pid, viewers: int, seconds: float) -> dict:
    service_stats(plan, "router", reset_lag=True)
    cpu_before, wall_before = cpu_s(pid), time.monotonic()
    answers: list[tuple[float, int]] = []
    until = wall_before + seconds
    await asyncio.gather(*(viewer(http, url, until, answers) for _ in range(viewers)), asyncio.sleep(seconds))
    cpu = (cpu_s(pid) - cpu_before) / (time.monotonic() - wall_before)
    lag = service_stats(plan, "router")["loop_lag_s"]["p99"]
    mean_ms = 1e3 * sum(t for t, _ in answers) / len(answers) if answers else 0.0
    mean_b = sum(b for _, b in answers) / len(answers) if answers else 0.0
    return {"viewers": viewers, "cpu_ms_per_s": 1e3 * cpu, "lag_p99_ms": 1e3 * lag, "answer_ms": mean_ms,
            "answer_bytes": mean_b}


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, mesh("pdd-mini", Path(tmp)) as (url, plan):
        pid = keeper_status(Path(tmp), "router")["child_pid"]
        async with aiohttp.ClientSession() as http:
            await asyncio.sleep(args.seconds)  # let start-up work settle before measuring
            rows = [await phase(http, url, plan, pid, viewers, args.seconds) for viewers in (0, 1, args.viewers)]
            started = time.perf_counter()
            async with http.get(f"{url}/dashboard/data") as reply:
                body = await reply.read()
            whole_ms = 1e3 * (time.perf_counter() - started)
            whole, whole_bytes = json.loads(body), len(body)
    print(f"pdd-mini, idle, {args.seconds:g} s per phase; router process (machine: {os.cpu_count()} cores)")
    print("| viewers | router CPU (ms/s) | loop lag p99 (ms) | data answer (ms) | answer (bytes) |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['viewers']} | {row['cpu_ms_per_s']:.1f} | {row['lag_p99_ms']:.2f} | {row['answer_ms']:.2f} "
              f"| {row['answer_bytes']:.0f} |")
    samples = len(whole["samples"])
    print(f"whole history: {samples} samples, {whole_bytes} bytes ({whole_bytes / max(1, samples):.0f} per sample), "
          f"{whole_ms:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--viewers", type=int, default=10)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
