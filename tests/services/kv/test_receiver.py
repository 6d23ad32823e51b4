"""The receiver's transfer table: a transfer that fails with nobody left waiting leaves nothing unread."""

from __future__ import annotations

import asyncio
import gc

import pytest

from services.kv.receiver import TransferFailed, TransferTable
from services.simulate.clock import run_virtual


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


def test_an_announce_after_the_wait_ended_opens_nothing():
    """Prefill's confirm (or a retried request's first attempt) can cross after main decode gave up."""
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
