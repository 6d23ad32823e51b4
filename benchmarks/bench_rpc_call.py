"""What one control call costs each end, on the mesh's own channel options and event loops.

A request's control plane is a handful of unary gRPC calls (CacheLookup, Announce, Handoff,
Prefill: docs/mesh.md §Request flow); a relayed (P-RLD-MD) request makes four more than a
P-MD one. This runs one of them, `Decode.Announce` with a transfer-sized message, between two
processes: the server on the standard asyncio loop and the mesh's server options (as a decode
service runs), the caller on uvloop with the mesh's client options, retry policy included (as
the router runs, services/cli/loop.py), one call at a time and 16 at once. It prints the CPU
microseconds each end spent per call (user + system, from psutil).

Two more shapes price a Generate whose tokens go through the token feed, so that its call carries
only the stats: `stream` is the server-streaming `Generate` with that one event, `fed` the unary
`GenerateFed` with the same reply (docs/mesh.md §Generate as one unary call).

    .venv/bin/python -m benchmarks.bench_rpc_call [--calls 3000] [--concurrency 1 16]
                                                  [--shapes announce stream fed]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

import psutil
import uvloop

from prometheus_client import CollectorRegistry

from services.rpc import channel, metadata, pb, pb_grpc, server
from services.rpc.auth import TokenCheck

BENCH_TOKEN = "bench-token"  # both ends are this benchmark's own processes

ANNOUNCE = pb.TransferAnnounce(request_id="cmpl-" + "0" * 24, frames=12, real_bytes=3_000_000,
                               emulated_bytes=3_000_000_000, num_tokens=24_000, first_token=17)
GENERATE = pb.GenerateRequest(request_id=ANNOUNCE.request_id, max_tokens=500, seed=1, expect_transfer=True,
                              held_prompt=pb.HeldPrompt(request_id=ANNOUNCE.request_id))
STATS = pb.GenerateEvent(stats=pb.GenerateStats(instance="main-decode-0", hit_tokens=24_000, end_position=500,
                                                kv_transfer_s=1.25))
SHAPES = ("announce", "stream", "fed")


class _Decode(pb_grpc.DecodeServicer):
    async def Announce(self, request, context):  # noqa: N802 (the gRPC method's name)
        return pb.TransferAck(accepted=True)

    async def Generate(self, request, context):  # noqa: N802
        yield STATS

    async def GenerateFed(self, request, context):  # noqa: N802
        return STATS


async def _serve() -> None:
    # The mesh's servers check the deployment token on every call (services/rpc/auth.py): so does this one.
    grpc_server = server(TokenCheck(BENCH_TOKEN, CollectorRegistry()))
    pb_grpc.add_DecodeServicer_to_server(_Decode(), grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    await grpc_server.start()
    print(port, flush=True)
    await grpc_server.wait_for_termination()


def _one_call(stub: pb_grpc.DecodeStub, shape: str):
    tags = metadata(ANNOUNCE.request_id)

    async def announce() -> None:
        await stub.Announce(ANNOUNCE, timeout=10.0, metadata=tags)

    async def stream() -> None:
        async for _ in stub.Generate(GENERATE, timeout=10.0, metadata=tags):
            pass

    async def fed() -> None:
        await stub.GenerateFed(GENERATE, timeout=10.0, metadata=tags)
    return {"announce": announce, "stream": stream, "fed": fed}[shape]


async def _call(port: int, calls: int, concurrency: int, remote: psutil.Process,
                shape: str = "announce") -> tuple[float, float, float]:
    """(server us/call, caller us/call, calls/s) of `calls` calls of `shape` (rounded down to a multiple
    of `concurrency`), `concurrency` at a time."""
    async with channel(f"127.0.0.1:{port}", BENCH_TOKEN) as control:
        one = _one_call(pb_grpc.DecodeStub(control), shape)
        for _ in range(200):  # warm-up: the connection, the code paths
            await one()

        async def worker(count: int) -> None:
            for _ in range(count):
                await one()

        me = psutil.Process()
        server_before, caller_before, start = _cpu(remote), _cpu(me), time.perf_counter()
        await asyncio.gather(*(worker(calls // concurrency) for _ in range(concurrency)))
        wall = time.perf_counter() - start
        done = calls // concurrency * concurrency
        return (_cpu(remote) - server_before) / done * 1e6, (_cpu(me) - caller_before) / done * 1e6, done / wall


def _cpu(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2])


def measure(calls: int, concurrency: int, shape: str = "announce") -> tuple[float, float, float]:
    served = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_rpc_call", "--serve"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(served.stdout.readline())
        return uvloop.run(_call(port, calls, concurrency, psutil.Process(served.pid), shape))
    finally:
        served.kill()
        served.wait(timeout=10)


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(_serve())
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 16])
    parser.add_argument("--shapes", nargs="*", choices=SHAPES, default=["announce"],
                        help="announce: unary Announce; stream: Generate with one event; fed: unary GenerateFed")
    args = parser.parse_args()
    print(f"{args.calls} calls of each shape; CPU us per call")
    for shape in args.shapes:
        for concurrency in args.concurrency:
            server_us, caller_us, rate = measure(args.calls, concurrency, shape)
            print(f"{shape:8s} {concurrency:3d} at a time: server {server_us:5.0f} us, caller {caller_us:5.0f} us, "
                  f"both {server_us + caller_us:5.0f} us ({rate:.0f} calls/s)")


if __name__ == "__main__":
    main()
