"""The receiver acknowledges whole frames, so the sender knows what landed: a broken connection
reports only what may be lost, and a stopped transfer with nothing before it in flight is cut by a
reset that drops its bytes wherever they wait (docs/mesh.md §Frames)."""

from __future__ import annotations

import asyncio
import socket

from netem.config import LinkConfig
from netem.link import UserspaceLink
from services.kv import sender as sender_module
from services.kv.frames import ACK, split_payload
from services.kv.receiver import KvReceiver
from services.kv.transfers import TransferTable
from services.kv.sender import KvSender
from tests.waiting import WAIT_S, until


async def _acking_server(handler):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # accepted sockets inherit it
    listener.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(handler, sock=listener)
    return server, listener.getsockname()[1]


async def test_the_receiver_acknowledges_each_whole_frame_with_the_count_so_far():
    table = TransferTable()
    receiver = KvReceiver(table, "127.0.0.1", 0)
    await receiver.start()
    port = receiver._server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frames = split_payload("a1", 3000, frame_bytes=1000)
        writer.write(b"".join(f.encode() for f in frames) + frames[0].encode()[:10])  # and a frame's start
        acks = await asyncio.wait_for(reader.readexactly(3 * ACK.size), WAIT_S)
        assert [ACK.unpack_from(acks, i * ACK.size)[0] for i in range(3)] == [1, 2, 3]
        writer.close()
    finally:
        await receiver.stop()


async def test_transfers_a_real_receiver_acknowledged_are_no_longer_counted_as_at_risk():
    table = TransferTable()
    receiver = KvReceiver(table, "127.0.0.1", 0)
    await receiver.start()
    sender = KvSender("127.0.0.1", receiver._server.sockets[0].getsockname()[1], connections=1)
    try:
        for rid in ("t1", "t2"):
            await sender.send(rid, 250_000, frame_bytes=100_000)
        (conn,) = sender._open
        assert conn.frames_written == 6
        await until(lambda: not conn.sent, "both transfers acknowledged")
        assert conn.frames_acked == 6 and table.bytes_received == 500_000
    finally:
        await sender.close()
        await receiver.stop()


async def test_a_broken_connection_reports_only_the_transfers_not_acknowledged():
    lost: list[list[str]] = []
    reported = asyncio.Event()

    async def acks_the_first_then_hangs_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(len(split_payload("t1", 1000)[0].encode()))
        writer.write(ACK.pack(1))
        await reader.read(2**20)  # takes t2's frame without acknowledging it
        writer.close()

    server, port = await _acking_server(acks_the_first_then_hangs_up)
    sender = KvSender("127.0.0.1", port, connections=1, on_lost=lambda ids: (lost.append(ids), reported.set()))
    try:
        await sender.send("t1", 1000)
        (conn,) = sender._open
        await until(lambda: conn.frames_acked == 1, "t1 acknowledged")
        await sender.send("t2", 1000)
        await asyncio.wait_for(reported.wait(), WAIT_S)
        assert lost == [["t2"]]
    finally:
        await sender.close()
        server.close()
        await server.wait_closed()


async def test_a_stopped_transfer_alone_in_flight_is_cut_by_a_reset():
    """What the transfer had handed over dies with the connection: the far end sees a reset, not the
    end of a stream it would read to the last buffered byte (the retired case, test_kv_sockets)."""
    go, ended = asyncio.Event(), asyncio.Event()
    seen: list[object] = []
    first = len(split_payload("t1", 1000)[0].encode())

    async def acks_then_stalls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(first)
        writer.write(ACK.pack(1))
        await go.wait()  # the sender is held by backpressure until the stop
        try:
            seen.append(len(await reader.read()))
        except ConnectionResetError as exc:
            seen.append(exc)
        ended.set()

    server, port = await _acking_server(acks_then_stalls)
    lost: list[list[str]] = []
    sender = KvSender("127.0.0.1", port, connections=1, on_lost=lost.append)
    frame = 4 * 2**20
    try:
        await sender.send("t1", 1000)
        (conn,) = sender._open
        await until(lambda: conn.frames_acked == 1, "t1 acknowledged")
        cancel = asyncio.Event()
        cut = asyncio.ensure_future(sender.send("t2", frame, cancel, frame_bytes=frame))
        await until(lambda: cut.done() or conn.writer.transport.get_write_buffer_size() > 0, "the slices backed up")
        cancel.set()
        go.set()  # the next slice drains, and the sender sees the stop
        result = await asyncio.wait_for(cut, WAIT_S)
        await asyncio.wait_for(ended.wait(), WAIT_S)
        assert result.cancelled and result.real_bytes == 0
        assert len(seen) == 1 and isinstance(seen[0], ConnectionResetError), seen
        assert lost == [] and not sender._open
        await sender.send("t3", 1000)  # on a fresh connection
        assert len(sender._open) == 1 and next(iter(sender._open)) is not conn
    finally:
        go.set()
        await sender.close()
        server.close()
        await server.wait_closed()


async def test_a_retired_connection_still_delivers_the_earlier_transfer_its_acknowledgements_follow():
    """Stopped with an earlier transfer still crossing a slow line, the connection stops writing but
    goes on reading the receiver's counts: closed outright, it would answer them with a reset, and
    the line would drop the earlier transfer's queued bytes with it."""
    table = TransferTable()
    receiver = KvReceiver(table, "127.0.0.1", 0)
    await receiver.start()
    slow = LinkConfig.model_validate({"up": {"rate": "8mbit", "queue": 64 * 1024}})
    lost: list[list[str]] = []
    earlier, frame = 1024 * 1024, 4 * 2**20
    async with UserspaceLink(("127.0.0.1", 0), receiver._server.sockets[0].getsockname(), slow) as link:
        sender = KvSender(*link.listen_address, connections=1, on_lost=lost.append)
        try:
            await sender.send("t1", earlier, frame_bytes=16 * 1024)  # handed over; its tail still queued
            (conn,) = sender._open
            cancel = asyncio.Event()
            cut = asyncio.ensure_future(sender.send("t2", frame, cancel, frame_bytes=frame))
            await until(sender._idle.empty, "t2 took the connection and wrote its first slice")
            assert conn.frames_acked < conn.frames_written  # t1 is not all across
            cancel.set()
            assert (await asyncio.wait_for(cut, WAIT_S)).cancelled
            await until(lambda: table.bytes_received == earlier, "every frame of t1 received")
            await until(lambda: conn.broken, "the receiver ended the retired connection")
            assert link.stats()["up"]["resets"] == 0 and lost == [] and not sender._open
        finally:
            await sender.close()
    await receiver.stop()


async def test_a_retired_connection_the_receiver_never_ends_is_closed_at_its_deadline(monkeypatch):
    """A receiver that reads to the end but neither acknowledges nor closes: the sender waits
    RETIRED_READ_S, then closes and reports the earlier transfer it never heard of as lost."""
    monkeypatch.setattr(sender_module, "RETIRED_READ_S", 0.2)
    go, released = asyncio.Event(), asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await go.wait()
        while await reader.read(2**16):
            pass
        await released.wait()  # holds the connection open, saying nothing
        writer.close()

    server, port = await _acking_server(silent)
    reported = asyncio.Event()
    lost: list[list[str]] = []
    sender = KvSender("127.0.0.1", port, connections=1, on_lost=lambda ids: (lost.append(ids), reported.set()))
    try:
        await sender.send("t1", 1000)
        cancel = asyncio.Event()
        cut = asyncio.ensure_future(sender.send("t2", 4 * 2**20, cancel, frame_bytes=4 * 2**20))
        await until(sender._idle.empty, "t2 took the connection and wrote its first slice")
        cancel.set()
        go.set()
        assert (await asyncio.wait_for(cut, WAIT_S)).cancelled
        await asyncio.wait_for(reported.wait(), WAIT_S)
        assert lost == [["t1"]] and not sender._open
    finally:
        go.set()
        released.set()
        await sender.close()
        server.close()
        await server.wait_closed()
