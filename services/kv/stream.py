"""Chunk-streamed KV: which frames of a transfer the sender may send while prefill is still running.

With streaming (scenario `kv_streaming`), prefill announces each transfer before
it computes, and after every engine step that computed part of the prompt the
frames whose bytes are now all computed leave at once, as Mooncake and
DistServe send KV chunk by chunk (docs/engine.md, "Streamed KV"). A frame is
the unit: one whose bytes straddle the computed end waits for the next chunk,
and the rest leaves with the last chunk, when the first token is known.
"""

from __future__ import annotations

import asyncio
import math

from services.kv.frames import DEFAULT_FRAME_PAYLOAD_BYTES, frame_count


class KvProgress:
    """Prompt tokens whose KV the sender holds, raised as prefill computes; ended when prefill ends."""

    def __init__(self, tokens: int = 0) -> None:
        self.tokens = tokens
        self.ended = False
        self._changed = asyncio.Event()

    def advance(self, tokens: int) -> None:
        if tokens > self.tokens:
            self.tokens = tokens
            self._changed.set()

    def end(self) -> None:
        """No more tokens will come: prefill finished, or failed and the streams stop short."""
        self.ended = True
        self._changed.set()

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


async def streamed_parts(extent: TransferExtent, progress: KvProgress | None):
    """Successive frame ranges to send, each as soon as its bytes are computed; stops short when
    progress ends before the whole extent (prefill failed: the shipper then aborts the transfer)."""
    sent = 0
    if progress is None:
        yield range(0, extent.frames)
        return
    held = -1
    while sent < extent.frames:
        held = await progress.beyond(held)
        ready = extent.frames_ready(held)
        if ready > sent:
            yield range(sent, ready)
            sent = ready
        elif progress.ended:
            return
