"""Chunk-streamed KV: which frames of a transfer the sender may send while prefill is still running.

With streaming (scenario `kv_streaming`), after every engine step that computed
part of the prompt the frames whose bytes are now all computed leave at once, as Mooncake and
DistServe send KV chunk by chunk (docs/engine.md, "Streamed KV"). A frame is
the unit: one whose bytes straddle the computed end waits for the next chunk,
and the rest leaves with the last chunk, when the first token is known: the
transfer's last frame carries it (its `Completion`), with the transfer's figures.
"""

from __future__ import annotations

import asyncio
import math
from typing import AsyncIterator

from services.kv.frames import DEFAULT_FRAME_PAYLOAD_BYTES, Completion, frame_count


class KvProgress:
    """Prompt tokens whose KV the sender holds, raised as prefill computes; ended when prefill ends."""

    def __init__(self, tokens: int = 0) -> None:
        self.tokens = tokens
        self.ended = False
        self.completion: Completion | None = None  # set when prefill finished with its first token
        self._changed = asyncio.Event()

    def advance(self, tokens: int) -> None:
        if tokens > self.tokens:
            self.tokens = tokens
            self._changed.set()

    def end(self) -> None:
        """No more tokens will come: prefill failed (the streams stop short), or finish() came first."""
        self.ended = True
        self._changed.set()

    def finish(self, completion: Completion) -> None:
        """Prefill computed the whole prompt and produced its first token: the rest may leave with it."""
        self.completion = completion
        self.end()

    async def beyond(self, tokens: int) -> int:
        """Tokens held once more than `tokens` are (or progress ended); bounded by prefill itself."""
        while self.tokens <= tokens and not self.ended:
            self._changed.clear()
            await self._changed.wait()
        return self.tokens


class TransferExtent:
    """Tokens [first_index, first_index + tokens) of a prompt, as `real` bytes in frames of `frame_bytes`."""

    def __init__(self, first_index: int, tokens: int, real: int, frame_bytes: int = DEFAULT_FRAME_PAYLOAD_BYTES):
        self.first_index, self.tokens, self.real, self.frame_bytes = first_index, tokens, real, frame_bytes
        self.frames = frame_count(real, frame_bytes)

    def frames_ready(self, held_tokens: int) -> int:
        """Frames whose every byte is computed when the sender holds the prompt's first `held_tokens`."""
        covered = min(max(0, held_tokens - self.first_index), self.tokens)
        if covered >= self.tokens:
            return self.frames
        ready_bytes = math.floor(self.real * covered / self.tokens)
        return min(self.frames, ready_bytes // self.frame_bytes)


Part = tuple[range, Completion | None]  # frames to send, and the completion their last one carries


async def streamed_parts(extent: TransferExtent, progress: KvProgress | None,
                         done: Completion | None = None) -> AsyncIterator[Part]:
    """Successive frame ranges to send, each as soon as its bytes are computed, the last frame with
    the first token; stops short when progress ends without it (prefill failed: the shipper then
    aborts the transfer). Without progress (sent after prefill) every frame at once, the last with `done`."""
    sent = 0
    if progress is None:
        yield range(0, extent.frames), done
        return
    held = -1
    while sent < extent.frames:
        held = await progress.beyond(held)
        if progress.completion is not None:
            yield range(sent, extent.frames), progress.completion
            return
        ready = min(extent.frames_ready(held), extent.frames - 1)  # the last frame waits for the first token
        if ready > sent:
            yield range(sent, ready), None
            sent = ready
        elif progress.ended:
            return
