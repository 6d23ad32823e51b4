"""KV transfers over one WAN line: a skewed hit distribution against a narrow one at the same mean.

Prefill's side of a cross-datacenter deployment, without GPUs: transfers
arrive as a Poisson stream, each carries the missed part of a 64K-token
prompt, (1 - hit) x context x KV bytes per token, and goes the way the mesh
sends KV: announced to a receiver's transfer table, then sent as real frames
(emulated bytes / byte_scale) through a pool of `connections` TCP connections
and a `pdd-emu link` process that shapes the line. The transfer time is the
receiver's: from the announce to the last frame, so waiting for a free
connection counts (docs/mesh.md §Transfer time; docs/results.md §WAN).
"""

from __future__ import annotations

import asyncio
import math
import random
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from loadgen.hitbins import DEFAULT_HIT_WEIGHTS, bin_bounds
from services.kv.frames import DEFAULT_FRAME_PAYLOAD_BYTES
from services.kv.receiver import KvReceiver
from services.kv.transfers import TransferFailed, TransferTable
from services.kv.sender import KvSender
from services.launcher.plan import free_port
from services.scenario.plan import LinkPlan
from services.launcher.processes import Started, link_command, stop_processes, wait_healthy
from services.profiles import load_model
from services.scenario import LinkSpec

HOST = "127.0.0.1"
HitDraw = Callable[[random.Random], float]


def skewed_hit(rng: random.Random) -> float:
    """The agentic mix: the seven bins at their default weights, uniform inside a bin (mean about 0.91)."""
    index = rng.choices(range(len(DEFAULT_HIT_WEIGHTS)), weights=DEFAULT_HIT_WEIGHTS)[0]
    return rng.uniform(*bin_bounds(index))


def narrow_hit(rng: random.Random) -> float:
    """Every request between 85% and 95% (mean 0.90)."""
    return rng.uniform(0.85, 0.95)


DISTRIBUTIONS: dict[str, HitDraw] = {"skewed": skewed_hit, "narrow": narrow_hit}


@dataclass(frozen=True)
class WanSetup:
    rate_rps: float  # transfers per second
    line: LinkSpec  # emulated
    duration_s: float  # sending
    warmup_s: float  # transfers announced before this are not counted
    model: str = "pdd-paper"
    context_tokens: int = 65536
    connections: int = 4  # one prefill process's pool towards one receiver, as in the mesh
    byte_scale: float = 2000.0
    seed: int = 0
    deadline_s: float = 300.0  # a transfer not whole by then is counted as failed


@dataclass(frozen=True)
class TransferStats:
    transfers: int
    failed: int
    p50_s: float
    p90_s: float
    p99_s: float
    mean_s: float
    max_s: float
    missed_tokens_mean: float
    offered_utilisation: float  # offered bytes / what the line carries in the same time


def offered_utilisation(rate_rps: float, missed_tokens_mean: float, kv_bytes_per_token: int, line_bps: float) -> float:
    return rate_rps * missed_tokens_mean * kv_bytes_per_token * 8 / line_bps


async def _start_link(setup: WanSetup, upstream_port: int, run_dir: Path) -> tuple[Started, int]:
    """A `pdd-emu link` process shaping the line; returns it and the port senders connect to."""
    link = LinkPlan(name="wan", src="prefill", dst="decode", kind="wan", host=HOST, listen_port=free_port(HOST),
                    control_port=free_port(HOST), upstream_port=upstream_port, spec=setup.line)
    cmd = link_command(link, setup.byte_scale, setup.seed, run_dir)
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    with open(run_dir / "logs" / "wan.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    started = Started("wan", proc.pid, f"http://{HOST}:{link.control_port}/health", tuple(cmd))
    await asyncio.to_thread(wait_healthy, [started], run_dir, 30.0)
    return started, link.listen_port


async def run_transfers(setup: WanSetup, draw: HitDraw, run_dir: Path) -> tuple[TransferStats, list[float]]:
    """Offer the stream for `setup.duration_s`, wait for every transfer; the stats and each counted time."""
    kv = load_model(setup.model).kv_bytes_per_token
    table = TransferTable()
    receiver = KvReceiver(table, HOST, free_port(HOST))
    await receiver.start()
    link, listen_port = await _start_link(setup, receiver.port, run_dir)
    sender = KvSender(HOST, listen_port, connections=setup.connections)
    rng = random.Random(setup.seed)
    times: list[float] = []
    missed: list[int] = []
    failed = 0

    async def one(index: int, tokens: int, counted: bool) -> None:
        nonlocal failed
        rid = f"t{index}"
        real = math.ceil(tokens * kv / setup.byte_scale)
        table.announce(rid, max(1, math.ceil(real / DEFAULT_FRAME_PAYLOAD_BYTES)), real, tokens * kv, 0, tokens)
        send = asyncio.create_task(sender.send(rid, real))
        try:
            transfer = await table.wait(rid, setup.deadline_s)
            if counted:
                times.append(transfer.seconds)
        except TransferFailed:
            failed += counted
        finally:
            table.discard(rid)
            await asyncio.gather(send, return_exceptions=True)

    tasks = []
    start = time.monotonic()
    try:
        offset, index = 0.0, 0
        while (offset := offset + rng.expovariate(setup.rate_rps)) < setup.duration_s:
            await asyncio.sleep(max(0.0, offset - (time.monotonic() - start)))
            tokens = max(1, round(setup.context_tokens * (1.0 - draw(rng))))
            counted = offset >= setup.warmup_s
            if counted:
                missed.append(tokens)
            tasks.append(asyncio.create_task(one(index, tokens, counted)))
            index += 1
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await sender.close()
        await receiver.stop()
        await asyncio.to_thread(stop_processes, [link])
    return _stats(times, failed, missed, setup, kv), times


def _stats(times: list[float], failed: int, missed: list[int], setup: WanSetup, kv: int) -> TransferStats:
    if not times:
        raise RuntimeError("no transfer completed; the line is too slow for the deadline")
    p50, p90, p99 = (float(v) for v in np.percentile(times, [50, 90, 99]))
    missed_mean = statistics.fmean(missed)
    return TransferStats(len(times), failed, p50, p90, p99, statistics.fmean(times), max(times), missed_mean,
                         offered_utilisation(setup.rate_rps, missed_mean, kv, setup.line.rate_bps))


