"""KvShipper on a virtual WAN link: a streamed transfer overlaps prefill, a cancelled one stops sending."""

from __future__ import annotations

import asyncio
import time

import pytest

from netem.virtual import VirtualLink
from services.kv.frames import Completion
from services.kv.transfers import TransferFailed, TransferTable
from services.kv.shipper import KvShipper
from services.kv.stream import KvProgress
from services.rpc import pb
from services.scenario.link_config import real_link_config
from services.scenario.loader import load_scenario
from services.simulate.clock import VirtualClock as _LoopClock, process_clocks, run_virtual, virtual_runner
from services.simulate.kvlink import VirtualKvSender
from services.simulate.wiring import simulated_plan
from tests.tolerance import assert_at_most, assert_close

# pd-cross-mini: llama3-8b (128 KiB of KV a token) over a 10 Gbit/s WAN; byte_scale 1000.
PLAN = simulated_plan(load_scenario("pd-cross-mini", ["wan.jitter_s=0"]))
TOKENS, CHUNK, CHUNK_S = 16384, 4096, 0.4  # four chunks of 0.4 s: 1.6 s of prefill
TRANSFER_S = TOKENS * 131072 * 8 / 10e9  # 1.72 s for the whole KV


class _Routes:
    """The receiver's Announce straight into its table; the bytes on a virtual link into the same table."""

    def __init__(self, table: TransferTable, link: VirtualLink) -> None:
        self.table, self.link = table, link
        self.announces = 0

    def stub(self, target):
        return self

    async def Announce(self, request, timeout, metadata):  # noqa: N802 (the gRPC method's name)
        self.announces += 1
        if request.abort_reason:
            self.table.fail(request.request_id, request.abort_reason)
        else:
            self.table.announce(request.request_id, request.frames, request.real_bytes, request.emulated_bytes,
                                request.first_token, request.num_tokens, request.first_token_pending)
        return pb.TransferAck(accepted=True)

    def sender(self, link, on_lost):
        return VirtualKvSender(self.link, self.table, on_lost=on_lost)

    async def close(self):
        return None


async def _prefill(progress: KvProgress | None, chunks: int = TOKENS // CHUNK) -> None:
    """Chunks computed one engine step after another, CHUNK_S each, on virtual time."""
    for i in range(1, chunks + 1):
        await asyncio.sleep(CHUNK_S)
        if progress is not None:
            progress.advance(i * CHUNK)


def _run(streamed: bool, cancel_after_s: float | None = None, fail_prefill: bool = False):
    async def body():
        loop = asyncio.get_running_loop()
        table = TransferTable()
        async with VirtualLink(real_link_config(PLAN.link("prefill", "decode"), PLAN.scenario.byte_scale),
                               seed=1) as link:
            routes = _Routes(table, link)
            shipper = KvShipper(PLAN, "prefill", routes)
            progress = KvProgress() if streamed else None
            waiting = asyncio.ensure_future(table.wait("r1", 60.0))
            if streamed:
                shipment = await shipper.ship("r1", "decode", TOKENS, progress=progress, cancellable=True)
            if cancel_after_s is not None:
                loop.call_later(cancel_after_s, shipper.cancel, "r1")
            await _prefill(progress, chunks=2 if fail_prefill else TOKENS // CHUNK)
            prefill_end = time.time()
            if fail_prefill:
                progress.end()
                await shipper.abandon(shipment, "prefill failed")
            elif streamed:
                progress.finish(Completion(7, prefill_end))
            else:
                shipment = await shipper.ship("r1", "decode", TOKENS, done=Completion(7, prefill_end))
            try:
                transfer = await asyncio.wait_for(asyncio.shield(waiting), 10.0)
            except (TransferFailed, TimeoutError) as exc:
                transfer = exc
            await asyncio.gather(*shipper._tasks)
            stats = shipper.stats() | {"announces": routes.announces}
            await shipper.close()
            return transfer, prefill_end, time.time(), shipment, table, stats
    with virtual_runner() as runner, process_clocks(_LoopClock(runner.get_loop())):
        return runner.run(body())


def test_a_streamed_transfer_lands_earlier_by_its_overlap_with_prefill():
    whole, whole_end, _, shipment, whole_table, _ = _run(streamed=False)
    streamed, streamed_end, _, _, table, stats = _run(streamed=True)
    assert whole_end == streamed_end
    start = whole_end - 4 * CHUNK_S
    # Sent after prefill: the whole transfer is exposed.
    assert_close(whole.finished_at - whole_end, 0.005 + TRANSFER_S, rel=0.02, what="whole KV after prefill")
    # Streamed: the line is the bottleneck from the first chunk on, so the KV lands one transfer after it
    # (docs/engine.md, "Streamed KV"), 1.2 s earlier than after prefill.
    assert_close(streamed.finished_at - start, CHUNK_S + TRANSFER_S + 0.005, rel=0.02, what="streamed arrival")
    assert_close(whole.finished_at - streamed.finished_at, 3 * CHUNK_S, rel=0.05, what="time saved")
    # kv_transfer_s counts only what the overlap did not hide: from prefill's end on.
    assert_close(streamed.seconds, TRANSFER_S + 0.005 - 3 * CHUNK_S, rel=0.05, what="exposed transfer")
    assert_close(whole.seconds, TRANSFER_S + 0.005, rel=0.02, what="whole transfer, from prefill's end")
    assert streamed.first_token == whole.first_token == 7
    assert stats["announces"] == 0  # the figures and the first token came with the last frame
    assert streamed.completed_in_band and whole.completed_in_band
    assert (whole.num_tokens, whole.real_bytes, whole.emulated_bytes) == \
        (shipment.tokens, shipment.real_bytes, shipment.emulated_bytes)
    assert table.bytes_received == whole_table.bytes_received == shipment.real_bytes == stats["kv_bytes_sent"]


def test_the_receiver_is_not_ready_before_the_first_token_even_with_every_byte():
    async def body():
        table = TransferTable()
        table.announce("r1", 2, 200, 200_000, -1, 10, first_token_pending=True)
        table.on_frame("r1", 0, 2, 100)
        table.on_frame("r1", 1, 2, 100)
        assert not table.entry("r1").done.done()
        table.announce("r1", 2, 200, 200_000, 9, 10)
        return await table.wait("r1", 1.0)
    assert run_virtual(body()).first_token == 9


def test_a_transfer_cancelled_mid_stream_sends_nothing_more():
    transfer, _, _, shipment, table, stats = _run(streamed=True, cancel_after_s=0.9)
    assert isinstance(transfer, TimeoutError)  # never complete: the receiver's deadline ends its wait
    assert stats["transfers_cancelled"] == 1
    # By 0.9 s the line has carried about half a second of KV, not the 1.72 s of all of it.
    assert 0 < table.bytes_received == stats["kv_bytes_sent"]
    assert_at_most(table.bytes_received, 0.6 * shipment.real_bytes, what="bytes sent before the cancel")


def test_a_prefill_that_fails_mid_stream_fails_the_transfer_at_once():
    transfer, prefill_end, now, shipment, table, stats = _run(streamed=True, fail_prefill=True)
    assert isinstance(transfer, TransferFailed) and "prefill failed" in str(transfer)
    assert now == pytest.approx(prefill_end, abs=0.01)  # told, not left to its deadline
    assert table.bytes_received < shipment.real_bytes and stats["transfers_cancelled"] == 1
