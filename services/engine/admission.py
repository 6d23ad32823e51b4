"""KV admission by blocks actually needed: the part of the step planner that takes and frees blocks.

A prompt's blocks are taken at admission, a decode grows block by block, and when blocks run
out the newest running sequence is preempted by recompute, as vLLM V1 does (docs/engine.md,
"Admission"). StepPlanner (step_planner.py) inherits these methods; the queues, the cache and
the counters they use are set up by its constructor.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from services.engine.sequence import SequenceState, Status

if TYPE_CHECKING:
    from services.engine.config import EngineConfig
    from services.engine.prefix_cache import PrefixCache


class BlockAdmission:
    config: EngineConfig
    cache: PrefixCache
    waiting: deque[SequenceState]
    running: list[SequenceState]
    _unscheduled: list[SequenceState]
    preemptions: int
    prefix_cache_query_tokens: int
    prefix_cache_hit_tokens: int
    host_cache_hit_tokens: int

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.config.block_size)

    def _grow(self, decodes: list[SequenceState]) -> bool:
        """Give every decode the block its next token needs, preempting the newest sequences if none is left."""
        preempted = False
        block_size = self.config.block_size
        for state in decodes:
            if state.computed % block_size:
                continue  # its next token's KV goes into the block its last token's is in: nothing to take
            if state.status is not Status.RUNNING:
                continue  # preempted by an earlier decode of this step
            while not self._has_blocks(state, 1):
                victim = self.running[-1]
                self._preempt(victim)
                preempted = True
                if victim is state:
                    break
        return preempted

    def _has_blocks(self, state: SequenceState, tokens: int) -> bool:
        """Reserve what computing `tokens` more tokens needs; False (nothing reserved) when it does not fit."""
        missing = self._blocks_for(state.computed + tokens) - self.cache.held_blocks(state.request_id)
        return missing <= 0 or self.cache.allocate(state.request_id, missing)

    def _preempt(self, state: SequenceState) -> None:
        """vLLM V1's preemption by recompute: free the KV, requeue at the head, compute it again later.

        Its published blocks stay cached (evictable), so re-admission usually hits most of them.
        """
        self.running.remove(state)
        self.cache.release(state.request_id)
        state.computed = state.chunk_origin = state.published_blocks = 0
        state.kv_tokens = state.kv_from = 0  # received KV is gone with the blocks
        state.pending_load_tokens = 0
        state.status = Status.WAITING
        state.stats.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(state)

    def _admit(self) -> list[SequenceState]:
        """Admit from the head of the queue while the prompt's blocks fit; returns those admitted."""
        cfg = self.config
        admitted: list[SequenceState] = []
        cap = cfg.running_cap
        while self.waiting and len(self.running) < cap:
            state = self.waiting[0]
            # At least the last context token is always computed: its logits give the next token.
            max_hit_blocks = (state.context_len - 1) // cfg.block_size
            if state.kv_from:  # above kv_from the KV was received: only the prefix below it is looked up
                max_hit_blocks = min(max_hit_blocks, state.kv_from // cfg.block_size)
            blocks = self._blocks_for(state.context_len)
            hit_blocks = self.cache.admit(state.request_id, state.hashes, blocks, max_hit_blocks)
            if hit_blocks is None:
                break  # strict FCFS: nothing overtakes the queue's head (docs/engine.md, "Admission")
            self.waiting.popleft()
            admitted.append(state)
            cache_hit = hit_blocks * cfg.block_size
            host_hit = self.cache.loaded_blocks(state.request_id) * cfg.block_size
            # Received KV counts only on top of the prefix below it; a prefix evicted since the sender
            # sized the transfer is computed again first (docs/engine.md, "Received KV").
            present = state.kv_tokens if cache_hit >= state.kv_from else 0
            state.computed = state.chunk_origin = min(max(present, cache_hit), state.context_len - 1)
            if cache_hit > state.kv_tokens or state.kv_from:  # a host load is needless only under received KV
                state.pending_load_tokens = host_hit
            state.published_blocks = hit_blocks
            self._publish(state)
            state.status = Status.RUNNING
            if not state.stats.preemptions:  # a recompute is not a new lookup of the request
                state.stats.hit_tokens = state.computed
                state.stats.cache_hit_tokens = cache_hit
                state.stats.host_hit_tokens = host_hit
                self.prefix_cache_query_tokens += state.context_len
                self.prefix_cache_hit_tokens += cache_hit - host_hit
                self.host_cache_hit_tokens += host_hit
            self.running.append(state)
            self._unscheduled.append(state)
        return admitted

    def _publish(self, state: SequenceState) -> None:
        blocks = state.computed // self.config.block_size
        if blocks > state.published_blocks:
            self.cache.commit(state.request_id, state.hashes, blocks)
            state.published_blocks = blocks
