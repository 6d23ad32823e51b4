"""Which frames of a streamed transfer may leave as prefill computes the prompt."""

from __future__ import annotations

import asyncio

from services.kv.frames import DEFAULT_FRAME_PAYLOAD_BYTES as FRAME, Completion
from services.kv.stream import KvProgress, TransferExtent, streamed_parts


def test_only_frames_whose_bytes_are_all_computed_are_ready():
    extent = TransferExtent(first_index=1000, tokens=4000, real=10 * FRAME)  # 400 tokens a frame
    assert extent.frames == 10
    assert extent.frames_ready(1000) == 0  # nothing of the transfer computed yet
    assert extent.frames_ready(1399) == 0  # the first frame's last bytes are not
    assert extent.frames_ready(1400) == 1
    assert extent.frames_ready(3100) == 5
    assert extent.frames_ready(4999) == 9  # the last frame waits for the last token
    assert extent.frames_ready(5000) == 10
    assert extent.frames_ready(9000) == 10


async def test_parts_follow_the_computed_tokens_and_cover_every_frame_once():
    extent = TransferExtent(first_index=0, tokens=4000, real=10 * FRAME)
    progress = KvProgress()
    parts = streamed_parts(extent, progress)
    progress.advance(1000)  # one engine step's chunk
    assert await anext(parts) == (range(0, 2), None)
    waiting = asyncio.ensure_future(anext(parts))
    progress.advance(1100)  # alone, it would complete no new frame
    progress.advance(2500)
    assert await asyncio.wait_for(waiting, 1.0) == (range(2, 6), None)
    progress.advance(4000)  # every byte computed, the first token not yet: the last frame waits for it
    assert await anext(parts) == (range(6, 9), None)
    done = Completion(first_token=42, prefill_done_unix=1234.5)
    progress.finish(done)
    assert await anext(parts) == (range(9, 10), done)
    assert [rest async for rest in parts] == []  # every frame sent: the stream ends by itself


async def test_a_finished_prefill_sends_every_frame_left_with_the_first_token():
    extent = TransferExtent(first_index=0, tokens=4000, real=10 * FRAME)
    progress = KvProgress()
    progress.advance(1000)
    done = Completion(first_token=3, prefill_done_unix=1.0)
    progress.finish(done)  # the progress reader had not seen the last chunks yet
    assert [part async for part in streamed_parts(extent, progress)] == [(range(0, 10), done)]


async def test_parts_stop_short_when_prefill_ends_early():
    extent = TransferExtent(first_index=0, tokens=4000, real=10 * FRAME)
    progress = KvProgress()
    progress.advance(2000)
    progress.end()  # prefill failed halfway
    parts = [part async for part in streamed_parts(extent, progress)]
    assert parts == [(range(0, 5), None)]  # no completion: the receiver is told the transfer failed


async def test_without_progress_the_whole_transfer_is_one_part():
    extent = TransferExtent(first_index=0, tokens=10, real=3 * FRAME + 1)
    assert [part async for part in streamed_parts(extent, None)] == [(range(0, 4), None)]
