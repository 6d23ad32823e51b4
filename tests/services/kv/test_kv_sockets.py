"""KV frames over real sockets: garbage never kills a receiver, lengths are bounded before reading,
and a sender reports what a broken connection may have swallowed."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from services.kv.frames import HEADER, MAX_FRAME_BYTES, KvFrame, split_payload
from services.kv.receiver import KvReceiver
from services.kv.transfers import TransferTable
from services.kv.sender import KvSender
from tests.integration.mesh import get_json, plan_of, running_mesh
from tests.waiting import WAIT_S, until


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _send_raw(port: int, data: bytes) -> bytes:
    """Write `data`, half-close, and return whatever comes back before the receiver closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()
    try:
        return await asyncio.wait_for(reader.read(), WAIT_S)
    finally:
        writer.close()


async def _transfer_completes(table: TransferTable, port: int, rid: str) -> None:
    frames = split_payload(rid, 300_000, frame_bytes=100_000)
    table.announce(rid, len(frames), 300_000, 300_000_000, first_token=1, num_tokens=10)
    await _send_raw(port, b"".join(f.encode() for f in frames))
    assert (await table.wait(rid, WAIT_S)).received_bytes == 300_000


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.lists(st.binary(max_size=512) | st.builds(lambda n, b: HEADER.pack(n) + b,
                                                            st.integers(0, 2**32 - 1), st.binary(max_size=64)),
                        min_size=1, max_size=4))
def test_garbage_on_a_real_socket_leaves_the_receiver_serving(garbage):
    async def scenario() -> None:
        table, port = TransferTable(), _free_port()
        receiver = KvReceiver(table, "127.0.0.1", port)
        await receiver.start()
        try:
            for data in garbage:
                await _send_raw(port, data)
            await _transfer_completes(table, port, "after-garbage")
        finally:
            await receiver.stop()

    asyncio.run(scenario())


async def test_an_oversized_length_closes_the_connection_without_reading_the_body():
    table, port = TransferTable(), _free_port()
    receiver = KvReceiver(table, "127.0.0.1", port)
    await receiver.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HEADER.pack(MAX_FRAME_BYTES + 1))  # and no body: the receiver must not wait for one
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
        writer.close()
        assert receiver.bad_frames == 1
        await _transfer_completes(table, port, "after-oversize")
    finally:
        await receiver.stop()


async def test_a_connection_that_breaks_reports_the_transfers_it_carried():
    lost: list[list[str]] = []
    reported = asyncio.Event()
    connections: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await reader.read(2**20)  # takes the bytes, then the test hangs up on the sender

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sender = KvSender("127.0.0.1", port, connections=1,
                      on_lost=lambda ids: (lost.append(ids), reported.set()))
    try:
        await sender.send("t1", 1000)
        await sender.send("t2", 1000)
        for writer in connections:
            writer.close()  # the far end goes away while the connection sits idle
        await asyncio.wait_for(reported.wait(), WAIT_S)
        assert lost == [["t1", "t2"]]
        await sender.send("t3", 1000)  # a fresh connection, not the dead one
        assert len(connections) == 2
    finally:
        await sender.close()
        server.close()
        await server.wait_closed()


async def test_a_cancelled_transfer_is_cut_mid_frame_and_its_connection_retired():
    """A stop lands between slices of a frame: the frame's rest never leaves, the connection closes
    after what it holds (the earlier transfer's bytes are not reported lost), and the next transfer
    opens a fresh one."""
    go, ended = asyncio.Event(), asyncio.Event()
    received: list[int] = []
    connections: list[asyncio.StreamWriter] = []

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await go.wait()  # reads nothing until told: the sender is held by backpressure
        total = 0
        while chunk := await reader.read(2**16):
            total += len(chunk)
        received.append(total)
        ended.set()

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # accepted sockets inherit it
    listener.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(slow, sock=listener)
    lost: list[list[str]] = []
    sender = KvSender("127.0.0.1", listener.getsockname()[1], connections=1, on_lost=lost.append)
    frame = 4 * 2**20
    try:
        await sender.send("t1", 1000)
        cancel = asyncio.Event()
        cut = asyncio.ensure_future(sender.send("t2", frame, cancel, frame_bytes=frame))
        await until(lambda: cut.done() or any(c.writer.transport.get_write_buffer_size() for c in sender._open),
                    "the frame's slices backed up")
        cancel.set()
        go.set()
        result = await asyncio.wait_for(cut, WAIT_S)
        await asyncio.wait_for(ended.wait(), WAIT_S)
        assert result.cancelled and result.real_bytes == 0
        assert received[0] < frame // 16  # t1 and about a slice of buffers; the frame's rest stayed
        assert lost == []
        await sender.send("t3", 1000)
        assert len(connections) == 2
    finally:
        go.set()
        await sender.close()
        server.close()
        await server.wait_closed()


async def test_a_streamed_transfer_in_parts_completes_only_with_its_first_token():
    table, port = TransferTable(), _free_port()
    receiver = KvReceiver(table, "127.0.0.1", port)
    await receiver.start()
    sender = KvSender("127.0.0.1", port)
    real = 10 * 100_000
    try:
        table.announce("s1", 10, real, real * 1000, first_token=-1, num_tokens=40, first_token_pending=True)
        waiting = asyncio.ensure_future(table.wait("s1", WAIT_S))
        for seqs in (range(0, 3), range(3, 7), range(7, 10)):  # one part per prefill chunk
            await sender.send("s1", real, frame_bytes=100_000, seqs=seqs)
        assert sender.transfers == 1 and sender.bytes_sent == real
        await until(lambda: waiting.done() or table.bytes_received >= real, "every byte of s1 received")
        assert not waiting.done()  # every byte, but no first token yet
        table.announce("s1", 10, real, real * 1000, first_token=5, num_tokens=40)
        transfer = await waiting
        assert transfer.received_bytes == real and transfer.first_token == 5
    finally:
        await sender.close()
        await receiver.stop()


@pytest.mark.integration
def test_a_long_prompt_over_the_real_wan_link_streams_its_kv(tmp_path):
    from tests.integration.test_mesh_modes import _stream

    prompt = [7] * 32768  # 4.3 GB of llama3-8b KV: 3.4 s over the 10 Gbit/s WAN after a 1.2 s prefill
    with running_mesh("pd-cross-mini", tmp_path, "kv_streaming=true") as url:
        text, pdd = _stream(url, prompt, 4)
        services = {s["name"]: s for s in plan_of(tmp_path)["services"]}
        stats = {name: get_json(f"http://{services[name]['host']}:{services[name]['http_port']}/stats")
                 for name in ("prefill", "decode")}
    whole_wait = 0.005 + 32768 * 131072 * 8 / 10e9
    # The frames left during prefill: the wait after it is the transfer less about a second of overlap.
    assert 0 < pdd["kv_transfer_s"] < whole_wait - 0.5, pdd
    assert stats["prefill"]["kv_bytes_sent"] == stats["decode"]["kv_bytes_received"] > 0


@pytest.mark.integration
def test_garbage_into_a_decode_services_kv_port_does_not_kill_it(tmp_path):
    from services.chaos.outcomes import FaultFreeText
    from tests.integration.test_mesh_modes import _stream

    with running_mesh("pd-intra-mini", tmp_path) as url:
        decode = next(s for s in plan_of(tmp_path)["services"] if s["name"] == "decode")
        garbage = [b"\x00" * 10, HEADER.pack(MAX_FRAME_BYTES * 4), b"GET / HTTP/1.1\r\n\r\n",
                   KvFrame("nobody", 0, 1, b"x" * 100).encode()[:-7], json.dumps({"v": 1}).encode()]

        async def throw() -> None:
            for data in garbage:
                await _send_raw(decode["kv_port"], data)

        asyncio.run(throw())
        stats = get_json(f"http://{decode['host']}:{decode['http_port']}/stats")
        assert stats["bad_frames"] >= 3
        text, _ = _stream(url, [3, 1, 4, 1, 5], 8)
    oracle = FaultFreeText(7, 128256)
    assert text == oracle.text(oracle.ids([3, 1, 4, 1, 5], 8))
