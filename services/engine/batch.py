"""What one engine step computes: the input of the roofline clock.

A step mixes prefill/extend chunks (run eagerly) and decode tokens (one new
token per sequence). A step with no chunk is a decode-only step, which serving
engines replay as a CUDA graph; any chunk makes the whole step eager.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.types import LaunchStyle


@dataclass(frozen=True, slots=True)
class Chunk:
    """`new_tokens` computed now for one sequence that already has `cached_tokens` of KV."""

    new_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True, slots=True)
class StepBatch:
    chunks: tuple[Chunk, ...] = ()
    decode_contexts: tuple[int, ...] = field(default=())  # KV length each decoding sequence attends over
    host_load_tokens: int = 0  # prefix KV loaded from host memory during this step (docs/engine.md, "Host tier")

    @property
    def launch_style(self) -> LaunchStyle:
        return LaunchStyle.EAGER if self.chunks else LaunchStyle.CUDA_GRAPH

    @property
    def new_tokens(self) -> int:
        return sum(c.new_tokens for c in self.chunks) + len(self.decode_contexts)

    @property
    def is_empty(self) -> bool:
        return not self.chunks and not self.decode_contexts
