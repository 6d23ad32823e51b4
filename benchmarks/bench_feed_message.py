"""What one token-feed message costs each end of a gRPC stream, against the mesh's per-token budget.

A decode service sends the router one `StepTokens` message per engine step (docs/mesh.md
§Token feed). This runs the same message shape, 64 tokens, over a grpc.aio server stream
between two processes, in a burst and spaced as engine steps are, and the same figures
as one length-prefixed msgpack frame over a bare asyncio TCP stream (the floor any
transport of one message per step pays), and prints the CPU microseconds each end spent
per message (user + system, from psutil):

    .venv/bin/python -m benchmarks.bench_feed_message [--messages 2000] [--gaps-ms 0 8]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

import struct

import grpc
import msgpack
import psutil

from services.rpc import pb, pb_grpc

IDS = [f"cmpl-{i:024x}" for i in range(64)]


class _Feed(pb_grpc.DecodeServicer):
    def __init__(self, messages: int, gap_s: float) -> None:
        self.messages, self.gap_s = messages, gap_s

    async def Tokens(self, request, context):  # noqa: N802 (the gRPC method's name)
        for i in range(self.messages):
            yield pb.StepTokens(request_id=IDS, position=[i] * 64, token=list(range(64)), t_unix=time.time())
            if self.gap_s:
                await asyncio.sleep(self.gap_s)


async def _serve(messages: int, gap_s: float) -> None:
    server = grpc.aio.server()
    pb_grpc.add_DecodeServicer_to_server(_Feed(messages, gap_s), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


async def _serve_bare(messages: int, gap_s: float) -> None:
    async def feed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for i in range(messages):
            body = msgpack.packb({"rid": IDS, "pos": [i] * 64, "tok": list(range(64)), "t": time.time()})
            writer.write(struct.pack(">I", len(body)) + body)
            await writer.drain()
            if gap_s:
                await asyncio.sleep(gap_s)
        writer.close()

    server = await asyncio.start_server(feed, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


async def _read_bare(port: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = 0
    try:
        while True:
            (length,) = struct.unpack(">I", await reader.readexactly(4))
            msgpack.unpackb(await reader.readexactly(length))
            received += 1
    except asyncio.IncompleteReadError:
        return received
    finally:
        writer.close()


async def _read(port: int) -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        await channel.channel_ready()
        return sum([1 async for _ in pb_grpc.DecodeStub(channel).Tokens(pb.TokensRequest())])


def _cpu(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2])


def measure(messages: int, gap_s: float, bare: bool = False) -> tuple[float, float, float]:
    """(server us/message, client us/message, wall seconds)."""
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_feed_message", "--serve",
                               str(messages), str(gap_s), "bare" if bare else "grpc"], stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        remote, me = psutil.Process(server.pid), psutil.Process()
        server_before, client_before, start = _cpu(remote), _cpu(me), time.perf_counter()
        received = asyncio.run((_read_bare if bare else _read)(port))
        wall = time.perf_counter() - start
        server_s, client_s = _cpu(remote) - server_before, _cpu(me) - client_before
    finally:
        server.kill()
        server.wait(timeout=10)
    if received != messages:
        raise RuntimeError(f"received {received} of {messages} messages")
    return server_s / messages * 1e6, client_s / messages * 1e6, wall


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve = _serve_bare if sys.argv[4] == "bare" else _serve
        asyncio.run(serve(int(sys.argv[2]), float(sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--gaps-ms", type=float, nargs="*", default=[0.0, 8.0],
                        help="time between messages; 8 ms is about a mini preset's decode step")
    args = parser.parse_args()
    print(f"{args.messages} messages of 64 tokens' figures; CPU us per message")
    for gap_ms in args.gaps_ms:
        for bare in (False, True):
            server_us, client_us, wall = measure(args.messages, gap_ms / 1e3, bare)
            how = "msgpack over asyncio TCP" if bare else "StepTokens over grpc.aio"
            print(f"gap {gap_ms:4g} ms, {how:25}: sender {server_us:6.0f} us, receiver {client_us:6.0f} us "
                  f"({args.messages / wall:.0f} messages/s)")


if __name__ == "__main__":
    main()
