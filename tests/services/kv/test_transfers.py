"""The receiver's transfer table: a transfer that fails with nobody left waiting leaves nothing unread."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from services.kv.frames import Completion
from services.kv.transfers import UNCLAIMED_KEPT, TransferFailed, TransferTable
from services.simulate.clock import run_virtual
from tests.tolerance import assert_close


def test_a_timed_out_wait_leaves_no_unretrieved_exception():
    unread: list[dict] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unread.append(context))
        table = TransferTable()
        table.announce("r1", frames=4, real_bytes=1024, emulated_bytes=1 << 20, first_token=7, num_tokens=16)
        with pytest.raises(TransferFailed, match="not complete within 0.5 s"):
            await table.wait("r1", timeout_s=0.5)
        assert table.failed == 1
        table.discard("r1")
        gc.collect()  # an unread future exception is reported when the future is collected
        await asyncio.sleep(0)

    run_virtual(main())
    assert not [c for c in unread if "never retrieved" in c.get("message", "")], unread


def test_a_failed_transfer_still_fails_a_later_waiter():
    async def main() -> None:
        table = TransferTable()
        table.announce("r1", frames=4, real_bytes=1024, emulated_bytes=1 << 20, first_token=7, num_tokens=16)
        table.fail("r1", "the link broke")
        with pytest.raises(TransferFailed, match="the link broke"):
            await table.wait("r1", timeout_s=5.0)

    run_virtual(main())


def test_a_streamed_transfer_is_ready_with_its_last_frame_and_timed_from_prefills_end():
    async def main() -> None:
        table = TransferTable()
        table.announce("r1", frames=2, real_bytes=512, emulated_bytes=1 << 19, first_token=-1, num_tokens=8,
                       first_token_pending=True)
        table.on_frame("r1", 0, 2, 256)
        table.on_frame("r1", 1, 2, 256, Completion(first_token=11, prefill_done_unix=time.time() - 0.25))
        transfer = await table.wait("r1", timeout_s=1.0)
        assert transfer.first_token == 11 and transfer.completed_in_band
        assert_close(transfer.seconds, 0.25, rel=0.01, what="prefill's end to the last frame")

    run_virtual(main())


def test_a_pending_announce_never_takes_back_a_first_token_the_last_frame_brought():
    async def main() -> None:
        table = TransferTable()
        table.entry("r1")  # main decode's wait came first
        table.on_frame("r1", 0, 1, 256, Completion(first_token=4, prefill_done_unix=time.time()))
        table.announce("r1", frames=1, real_bytes=256, emulated_bytes=1 << 18, first_token=-1, num_tokens=4,
                       first_token_pending=True)
        assert (await table.wait("r1", timeout_s=1.0)).first_token == 4

    run_virtual(main())


def test_an_announce_after_the_wait_ended_opens_nothing():
    """A retried request's first attempt (or an abort) can cross after main decode gave up."""
    async def main() -> None:
        table = TransferTable()
        table.announce("r1", frames=4, real_bytes=1024, emulated_bytes=1 << 20, first_token=-1, num_tokens=16,
                       first_token_pending=True)
        with pytest.raises(TransferFailed):
            await table.wait("r1", timeout_s=0.5)
        table.discard("r1")
        assert table.announce("r1", frames=4, real_bytes=1024, emulated_bytes=1 << 20, first_token=7,
                              num_tokens=16) is None
        table.on_frame("r1", 0, 4, 256)
        assert table.pending == 0 and table.late_announces == 1 and table.orphan_frames == 1

    run_virtual(main())


def test_a_completed_transfer_is_freed_by_reference_counting():
    """Its future does not hold the transfer (a cycle): once discarded, nothing keeps it."""
    import weakref

    async def main() -> None:
        table = TransferTable()
        table.announce("r1", frames=1, real_bytes=256, emulated_bytes=1 << 18, first_token=5, num_tokens=4)
        table.on_frame("r1", 0, 1, 256)
        transfer = await table.wait("r1", timeout_s=1.0)
        assert transfer.first_token == 5 and transfer.received_bytes == 256
        gone = weakref.ref(transfer)
        del transfer
        table.discard("r1")
        assert gone() is None

    gc.disable()  # only reference counting may free it
    try:
        run_virtual(main())
    finally:
        gc.enable()


def test_frames_before_the_decode_request_open_the_transfer_and_the_last_one_readies_it_without_an_announce():
    async def main() -> None:
        table = TransferTable()
        done = Completion(first_token=9, prefill_done_unix=time.time() - 0.5, num_tokens=16,
                          emulated_bytes=1 << 19, real_bytes=512)
        table.on_frame("r1", 1, 2, 256, done)  # the last frame first: the first one is still on the line
        assert table.pending == 1 and not table.entry("r1").done.done()
        waiting = asyncio.ensure_future(table.wait("r1", timeout_s=1.0))  # the decode request comes now
        table.on_frame("r1", 0, 2, 256)
        transfer = await waiting
        assert (transfer.first_token, transfer.num_tokens, transfer.emulated_bytes) == (9, 16, 1 << 19)
        assert transfer.frames == 2 and transfer.completed_in_band and table.orphan_frames == 0
        assert_close(transfer.seconds, 0.5, rel=0.1, what="timed from prefill's end, as the frame carried it")
        table.discard("r1")
        table.on_frame("r1", 0, 2, 256)  # a late frame of an ended request opens nothing
        assert table.pending == 0 and table.orphan_frames == 1

    run_virtual(main())


def test_a_transfer_whose_figures_never_came_is_not_whole_and_a_short_one_fails():
    async def main() -> None:
        table = TransferTable()
        table.on_frame("r1", 0, 1, 256, Completion(first_token=3, prefill_done_unix=time.time()))  # no figures
        assert not table.entry("r1").done.done()  # nothing says how many bytes: it waits for an announce
        table.on_frame("r2", 0, 1, 100, Completion(3, time.time(), num_tokens=4, emulated_bytes=256_000,
                                                   real_bytes=256))
        with pytest.raises(TransferFailed, match="received 100 bytes of its 256"):
            await table.wait("r2", timeout_s=1.0)

    run_virtual(main())


def test_frames_for_unknown_requests_expire_as_orphans_and_are_bounded_meanwhile():
    """The attack: 100,000 frames for made-up ids once left transfers_pending at 100,000 and 75 MB for good."""
    async def main() -> None:
        table = TransferTable(unclaimed_s=30.0)
        for i in range(100_000):
            table.on_frame(f"made-up-{i}", 0, 2, 100)
        assert table.pending == UNCLAIMED_KEPT and table.orphan_frames == 100_000 - UNCLAIMED_KEPT
        table.on_frame(f"made-up-{99_999 - UNCLAIMED_KEPT}", 1, 2, 100)  # a later frame of a dropped one: an orphan
        claimed = table.entry("real")  # a decode request waits for this one: never expired
        table.on_frame("early", 0, 1, 100, Completion(first_token=3, prefill_done_unix=time.time(),
                                                        num_tokens=8, emulated_bytes=100_000, real_bytes=100))
        await asyncio.sleep(29.0)
        table.entry("early")  # its request came within unclaimed_s: it stays, whole
        await asyncio.sleep(2.0)
        assert table.pending == 1 and not claimed.done.done()  # only "real", still awaited
        assert table.orphan_frames == 100_001 and table.orphans_expired == 100_000
        table.discard("real")
        table.discard("early")
        assert table.pending == 0
        table.close()

    run_virtual(main())
