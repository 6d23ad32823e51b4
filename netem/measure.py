"""Measure a link from outside: a traffic peer in its own process sends and sinks bytes.

The peer owns both ends (the client that sends into the link and the upstream
server the link forwards to), so one clock (time.perf_counter, CLOCK_MONOTONIC,
shared across processes) times both, and the link's event loop shares its
process with nothing else. Used by benchmarks/bench_netem_*.py.

    peer = await TrafficPeer.start()            # upstream sink on peer.sink_address
    async with UserspaceLink(("127.0.0.1", 0), peer.sink_address, config) as link:
        result = await peer.run("bulk", link.listen_address, nbytes=1 << 28)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import selectors
import socket
import struct
import sys
import threading
import time
from typing import Any

BENCH_NICE = -15


def raise_priority(nice: int = BENCH_NICE) -> str:
    """Run this process (and the peer it starts) at a higher CPU priority when allowed.

    On a machine shared with other work, the scheduler can keep a woken process
    off the CPU for milliseconds; a link's timers are only as good as its wake-ups
    (docs/netem.md, "Timer precision"). Returns a line saying what was done.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        return f"priority: unchanged (nice {os.getpriority(os.PRIO_PROCESS, 0)}; raising it needs privileges)"
    return f"priority: nice {nice} for the link and the traffic peer"


BLOCK = 1 << 20
STAMP = 64 * 1024  # a sequence number every STAMP bytes makes every block distinct
RECORD = struct.Struct("!Id")  # small-message record: sequence, send time


def _block(index: int, seed: bytes) -> bytes:
    block = bytearray(seed)
    for offset in range(0, BLOCK, STAMP):
        struct.pack_into("!Q", block, offset, index * (BLOCK // STAMP) + offset // STAMP)
    return bytes(block)


def _sink(listener: socket.socket, expect: int, mode: str, hashing: bool, timeout: float) -> dict[str, Any]:
    """Accept `expect` connections and read them to EOF; times and (optionally) a stream hash."""
    sel = selectors.DefaultSelector()
    listener.setblocking(False)
    sel.register(listener, selectors.EVENT_READ)
    digest = hashlib.sha256()
    buf = bytearray(4 << 20)
    view = memoryview(buf)
    total, open_conns, accepted = 0, 0, 0
    first = last = None
    delays: list[float] = []
    partial: dict[socket.socket, bytes] = {}
    deadline = time.perf_counter() + timeout
    while (accepted < expect or open_conns) and time.perf_counter() < deadline:
        for key, _ in sel.select(timeout=0.5):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ)
                accepted += 1
                open_conns += 1
                continue
            conn = key.fileobj  # type: ignore[assignment]
            n = conn.recv_into(buf)
            now = time.perf_counter()
            if n == 0:
                sel.unregister(conn)
                conn.close()
                open_conns -= 1
                continue
            first = first or now
            last = now
            total += n
            if mode == "records":
                data = partial.pop(conn, b"") + bytes(view[:n])
                usable = len(data) - len(data) % RECORD.size
                for seq, sent in RECORD.iter_unpack(data[:usable]):
                    if seq != WARMUP:
                        delays.append(now - sent)
                if usable < len(data):
                    partial[conn] = data[usable:]
            elif hashing:
                digest.update(view[:n])
    return {"bytes": total, "first_s": first, "last_s": last, "sha256": digest.hexdigest(), "delays_s": delays}


def _send_bulk(address: tuple[str, int], nbytes: int, duration: float | None, hashing: bool) -> dict[str, Any]:
    seed = bytes(range(256)) * (BLOCK // 256)
    digest = hashlib.sha256()
    with socket.create_connection(address) as sock:
        start = time.perf_counter()
        sent, index = 0, 0
        while (sent < nbytes) if duration is None else (time.perf_counter() - start < duration):
            block = memoryview(_block(index, seed) if hashing else seed)
            piece = block if duration is not None else block[: min(BLOCK, nbytes - sent)]
            sock.sendall(piece)
            if hashing:
                digest.update(piece)
            sent += len(piece)
            index += 1
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)  # wait for the link to pass our FIN on and close
    return {"sent": sent, "start_s": start, "sha256": digest.hexdigest()}


WARMUP = 0xFFFFFFFF  # sequence number of records the sink ignores


def _send_records(address: tuple[str, int], count: int, gap: float, connections: int) -> dict[str, Any]:
    socks = [socket.create_connection(address) for _ in range(connections)]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(RECORD.pack(WARMUP, 0.0))  # opens the link's upstream leg before timing starts
    time.sleep(0.2)
    start = time.perf_counter()
    for seq in range(count):
        wake = start + seq * gap  # absolute send times: no drift from sleep error
        pause = wake - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        socks[seq % connections].sendall(RECORD.pack(seq, time.perf_counter()))
    for s in socks:
        s.shutdown(socket.SHUT_WR)
    for s in socks:
        s.recv(1)
        s.close()
    return {"sent": count, "start_s": start}


def _peer_main() -> None:
    """Serve jobs given as JSON lines on stdin, one JSON result line each on stdout."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    print(json.dumps(listener.getsockname()), flush=True)
    for line in sys.stdin:
        kind, address, opts = json.loads(line)
        address = tuple(address)
        expect = opts.get("connections", 1) if kind == "records" else 1
        result: dict[str, Any] = {}
        sink = threading.Thread(target=lambda: result.update(sink=_sink(
            listener, expect, kind, opts.get("hashing", False), opts.get("timeout", 600.0))))
        sink.start()
        if kind == "bulk":
            result["send"] = _send_bulk(address, opts.get("nbytes", 0), opts.get("duration"), opts.get("hashing", False))
        else:
            result["send"] = _send_records(address, opts["count"], opts["gap"], opts.get("connections", 1))
        sink.join()
        print(json.dumps(result), flush=True)


class TrafficPeer:
    def __init__(self, process: asyncio.subprocess.Process, sink_address: tuple[str, int]) -> None:
        self._process = process
        self.sink_address = sink_address

    @classmethod
    async def start(cls) -> TrafficPeer:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "netem.measure", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=1 << 26,  # a records result carries every delay on one line
        )
        assert process.stdout is not None
        host, port = json.loads(await process.stdout.readline())
        return cls(process, (host, port))

    async def run(self, kind: str, address: tuple[str, int], **opts: Any) -> dict[str, Any]:
        """kind "bulk" (nbytes or duration, hashing) or "records" (count, gap, connections)."""
        stdin, stdout = self._process.stdin, self._process.stdout
        if stdin is None or stdout is None:
            raise RuntimeError("the traffic peer has no pipes")
        stdin.write((json.dumps([kind, list(address), opts]) + "\n").encode())
        await stdin.drain()
        line = await stdout.readline()
        if not line:
            raise RuntimeError(f"the traffic peer exited (code {await self._process.wait()})")
        return json.loads(line)

    async def stop(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), 10)
        except asyncio.TimeoutError:
            self._process.kill()
            await self._process.wait()


if __name__ == "__main__":
    _peer_main()
