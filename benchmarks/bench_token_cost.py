"""What one streamed token costs the mesh, against a bare aiohttp SSE server in the same run.

The floor server (benchmarks/floor_server.py) runs throughout. For each mini
preset, after a warm-up, 64 concurrent streamed completions of 500 tokens each
go to the floor and then to the mesh, back to back, three times; the CPU time
(user + system, from /proc through psutil) every process spent during a load,
divided by the tokens the client received, is the cost per streamed token. Each
process keeps its lowest figure (other work on a shared machine only inflates
CPU time), and the ratio printed is the median of the three (mesh / floor)
pairs, whose halves ran under the same machine load (docs/mesh-measured.md §Cost of a
streamed token). Then, per preset, rising concurrency of shorter streams: the
highest output-token rate at which every service's event-loop lag p99 stays at
or under 5 ms. Last, the client's own cost per chunk: the bench client's SSE
parsing (loadgen.bench.client.read_stream) against a bare aiohttp client that
only splits lines, both reading from the floor server.

    .venv/bin/python -m benchmarks.bench_token_cost [--streams 64] [--tokens 500] [--presets pd-intra-mini ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import aiohttp
import psutil

from benchmarks.meshctl import mesh, service_stats
from loadgen.bench.client import read_stream
from loadgen.sse import StreamTally
from services.experiments.handoff import fresh_prompt
from services.cli.loop import ENV as LOOP_ENV
from services.launcher.processes import read_state

PRESETS = ("pd-intra-mini", "pd-cross-mini", "pdd-mini")
LAG_LIMIT_S = 0.005
MODEL = "llama3-8b"


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system seconds of each process and everything it started.

    A mesh service's pid is its keeper's (services/launcher/keeper.py), which spends almost nothing;
    the service itself is the keeper's child.
    """
    out = {}
    for name, pid in pids.items():
        root = psutil.Process(pid)
        out[name] = sum(sum(p.cpu_times()[:2]) for p in (root, *root.children(recursive=True)))
    return out


async def probe_client(http: aiohttp.ClientSession, url: str, prompt: list[int], tokens: int) -> int:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": tokens, "stream": True}
    tally = StreamTally(sent_at=time.perf_counter())
    async with http.post(f"{url}/v1/completions", json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {(await response.text())[:500]}")
        await read_stream(response, tally)
    return len(tally.token_times)


async def bare_client(http: aiohttp.ClientSession, url: str, prompt: list[int], tokens: int) -> int:
    """The least a client can do: split the stream into lines and count the data lines."""
    body = {"model": MODEL, "prompt": prompt, "max_tokens": tokens, "stream": True}
    count = 0
    async with http.post(f"{url}/v1/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.content:
            if line.startswith(b"data:"):
                count += 1
    return count - 1  # the [DONE] line


async def load(url: str, streams: int, tokens: int, seed: int, client=probe_client) -> tuple[int, float]:
    """`streams` concurrent streams of `tokens` tokens; (tokens received, wall seconds)."""
    prompts = [fresh_prompt(128, seed + i) for i in range(streams)]
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as http:
        start = time.perf_counter()
        counts = await asyncio.gather(*(client(http, url, p, tokens) for p in prompts))
        wall = time.perf_counter() - start
    if any(c != tokens for c in counts):
        raise RuntimeError(f"streams ended short: {sorted(set(counts))} tokens, expected {tokens}")
    return sum(counts), wall


def one_load(url: str, pids: dict[str, int], streams: int, tokens: int, seed: int, client=probe_client) -> dict:
    """CPU us per received token of every process in `pids`, and of this (the client's) process."""
    me = psutil.Process()
    before, own_before = cpu_seconds(pids), sum(me.cpu_times()[:2])
    received, wall = asyncio.run(load(url, streams, tokens, seed, client))
    after, own_after = cpu_seconds(pids), sum(me.cpu_times()[:2])
    per_token = {name: (after[name] - before[name]) / received * 1e6 for name in pids}
    return {"per_token_us": per_token, "total_us": sum(per_token.values()), "tokens_per_s": received / wall,
            "client_us": (own_after - own_before) / received * 1e6}


def lowest(runs: list[dict]) -> dict:
    """Each process's lowest figure over the runs: a shared machine inflates CPU time, never deflates it."""
    per_token = {name: min(run["per_token_us"][name] for run in runs) for name in runs[0]["per_token_us"]}
    return {"per_token_us": per_token, "total_us": sum(per_token.values()),
            "tokens_per_s": max(run["tokens_per_s"] for run in runs), "client_us": min(r["client_us"] for r in runs)}


def relayed_requests(plan) -> int:
    """Requests the plan's relays took (handed off or finished there): a PDD load's cost follows this share."""
    return sum(stats["relay_handoffs"] + stats["relay_finished_here"]
               for stats in (service_stats(plan, s.name) for s in plan.services if s.role.value == "relay-decode"))


def paired(floor: tuple[str, int], target: tuple[str, dict[str, int]], args, seed: int,
           plan=None) -> tuple[dict, dict, float]:
    """Loads on the floor and on the target, alternated; (floor, target, median of the pairs' ratios).

    Each pair runs back to back, so whatever else loads the machine weighs on both of its halves.
    With a `plan`, the target's result also lists how many requests each load relayed.
    """
    (floor_url, floor_pid), (url, pids) = floor, target
    for where, who in ((floor_url, {"floor": floor_pid}), (url, pids)):  # warm-up: connections, code paths
        one_load(where, who, min(args.streams, 16), 50, seed + 50_000)
    floors, targets, relayed = [], [], []
    for i in range(args.repeats):
        floors.append(one_load(floor_url, {"floor": floor_pid}, args.streams, args.tokens, seed + 1000 * i))
        before = relayed_requests(plan) if plan is not None else 0
        targets.append(one_load(url, pids, args.streams, args.tokens, seed + 1000 * i + 500))
        relayed.append(relayed_requests(plan) - before if plan is not None else 0)
    ratios = sorted(t["total_us"] / f["total_us"] for f, t in zip(floors, targets))
    return lowest(floors), {**lowest(targets), "relayed": relayed}, ratios[len(ratios) // 2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def floor_server(step_ms: float) -> Iterator[tuple[str, int]]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.floor_server", "--port", str(port),
                             "--step-ms", str(step_ms)], stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the floor server did not start") from None
                time.sleep(0.05)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def sustained_rate(url: str, plan, levels: tuple[int, ...], tokens: int) -> list[tuple[int, float, float]]:
    """(streams, output tokens/s, worst service lag p99) per concurrency level, in order."""
    rows = []
    for i, streams in enumerate(levels):
        for service in plan.services:
            service_stats(plan, service.name, reset_lag=True)
        received, wall = asyncio.run(load(url, streams, tokens, 95_000 + 1000 * i))
        lag = max(service_stats(plan, s.name)["loop_lag_s"]["p99"] for s in plan.services)
        rows.append((streams, received / wall, lag))
    return rows


def print_cost(name: str, result: dict, ratio: float) -> None:
    parts = ", ".join(f"{n} {us:.1f}" for n, us in sorted(result["per_token_us"].items(), key=lambda kv: -kv[1]))
    relayed = f"; relayed {'/'.join(map(str, result['relayed']))} per load" if any(result.get("relayed", ())) else ""
    print(f"{name:<24}{result['total_us']:7.1f} us/token  ratio {ratio:5.2f}  "
          f"({result['tokens_per_s']:.0f} tokens/s; {parts}{relayed})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--presets", nargs="*", default=list(PRESETS))
    parser.add_argument("--repeats", type=int, default=3, help="measured (floor, mesh) pairs of loads per preset")
    parser.add_argument("--step-ms", type=float, default=10.0, help="the floor server's time between chunks")
    parser.add_argument("--levels", type=int, nargs="*", default=[8, 16, 32, 64, 128, 256],
                        help="concurrency levels of the sustained-rate search (empty: skip it)")
    parser.add_argument("--level-tokens", type=int, default=200)
    parser.add_argument("--compare-loop", action="store_true",
                        help=f"run the first preset again with {LOOP_ENV}=asyncio (the router on asyncio's loop)")
    args = parser.parse_args()
    print(f"{args.streams} streams x {args.tokens} tokens; CPU us per streamed token (user + system), lowest of "
          f"{args.repeats} loads per process; ratio: median over {args.repeats} back-to-back (floor, mesh) pairs")
    rates = {}
    runs = [(preset, "auto") for preset in args.presets]
    if args.compare_loop and args.presets:
        runs.append((args.presets[0], "asyncio"))
    with floor_server(args.step_ms) as floor:
        floor_url, floor_pid = floor
        one_load(floor_url, {"floor": floor_pid}, min(args.streams, 16), 50, 7)
        clients = [(one_load(floor_url, {"floor": floor_pid}, args.streams, args.tokens, 3 + i),
                    one_load(floor_url, {"floor": floor_pid}, args.streams, args.tokens, 4 + i, client=bare_client))
                   for i in range(args.repeats)]
        for preset, loop in runs:
            os.environ[LOOP_ENV] = loop  # the mesh's processes inherit it
            label = preset if loop == "auto" else f"{preset}[{loop}]"
            with tempfile.TemporaryDirectory() as tmp, mesh(preset, Path(tmp)) as (url, plan):
                _, started = read_state(Path(tmp))
                floor_cost, result, ratio = paired(floor, (url, {p.name: p.pid for p in started}), args, 10_000, plan)
                print_cost("floor", floor_cost, 1.0)
                print_cost(label, result, ratio)
                if args.levels and loop == "auto":
                    rates[preset] = sustained_rate(url, plan, tuple(args.levels), args.level_tokens)
    ours, bare = lowest([c[0] for c in clients]), lowest([c[1] for c in clients])
    print(f"client: bench client {ours['client_us']:.1f} us/chunk, bare aiohttp client {bare['client_us']:.1f} "
          f"us/chunk, ratio {ours['client_us'] / bare['client_us']:.2f}")
    for preset, rows in rates.items():
        ok = [rate for _, rate, lag in rows if lag <= LAG_LIMIT_S]
        levels = "; ".join(f"{n} streams {rate:.0f} tok/s lag p99 {lag * 1e3:.1f} ms" for n, rate, lag in rows)
        best = f"{max(ok):.0f} tokens/s" if ok else "none within the lag limit"
        print(f"sustained {preset}: {best} ({levels})")


if __name__ == "__main__":
    main()
