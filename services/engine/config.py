"""What an engine instance is configured with (docs/engine.md, "API", "Scheduling")."""

from __future__ import annotations

from dataclasses import dataclass

from services.engine.prefix_cache import DEFAULT_BLOCK_SIZE
from services.engine.sizing import default_max_running


@dataclass(frozen=True, slots=True)
class EngineConfig:
    kv_capacity_blocks: int  # see prefix_cache.kv_capacity_blocks
    vocab_size: int
    block_size: int = DEFAULT_BLOCK_SIZE
    max_num_batched_tokens: int = 8192  # token budget of one step (decodes + chunks), vLLM's name
    # Most prefill/extend tokens one sequence computes in a step, vLLM's long_prefill_token_threshold.
    # None (the default, as in vLLM and SGLang): one sequence may take the whole step budget.
    chunk_size: int | None = None
    # Cap on running sequences, vLLM's max_num_seqs; None: derived from the KV capacity as SGLang
    # does (sizing.default_max_running, docs/engine.md "Admission").
    max_running: int | None = None
    max_context: int | None = None  # prompt + output tokens a request may reach
    max_waiting: int | None = None  # submit raises EngineFull beyond this; None: unbounded
    # A tail chunk (the one that completes a context computed over several steps) runs without
    # other sequences' chunks, as engines that keep one chunked request per prefill batch do
    # (docs/engine.md, "Tail isolation"). Off: tails share steps like any chunk.
    isolate_tail_chunks: bool = False
    host_cache_blocks: int = 0  # host-memory (DRAM) prefix tier, in blocks; 0: no host tier

    def __post_init__(self) -> None:
        positive = ("kv_capacity_blocks", "vocab_size", "block_size", "max_num_batched_tokens")
        optional = ("chunk_size", "max_running")
        for name in positive + tuple(n for n in optional if getattr(self, n) is not None):
            if getattr(self, name) < 1:
                raise ValueError(f"engine config: {name} must be at least 1, got {getattr(self, name)}")
        if self.host_cache_blocks < 0:
            raise ValueError(f"engine config: host_cache_blocks must be 0 or more, got {self.host_cache_blocks}")

    @property
    def running_cap(self) -> int:
        if self.max_running is not None:
            return self.max_running
        return default_max_running(self.kv_capacity_blocks * self.block_size, self.max_context)

    @property
    def prefill_cap(self) -> int:
        return self.max_num_batched_tokens if self.chunk_size is None else self.chunk_size
