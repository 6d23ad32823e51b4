"""Continuous batching with chunked prefill: what each step computes, and what it produced.

Pure bookkeeping with no clock and no asyncio, so the policy can be read and
tested on its own; the Engine (scheduler.py) times the steps. The policies
(admission, preemption, budget, chunks) are in docs/engine.md, "Scheduling".
EngineConfig lives in config.py and is importable from here too.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

from services.engine.admission import BlockAdmission
from services.engine.batch import Chunk, StepBatch
from services.engine.config import EngineConfig
from services.engine.prefix_cache import PrefixCache
from services.engine.sequence import EngineFull, FinishedEvent, SequenceState, Status, TokenEvent
from services.engine.tokens import token_at
from services.types import Seconds

__all__ = ["EngineConfig", "StepPlan", "StepPlanner"]
_new_tuple = tuple.__new__  # TokenEvent(...) runs NamedTuple's Python __new__, once per token; this builds it in C


@dataclass(frozen=True, slots=True)
class StepPlan:
    batch: StepBatch
    decodes: tuple[SequenceState, ...]
    chunks: tuple[tuple[SequenceState, int], ...]  # (sequence, tokens of its chunk)


class StepPlanner(BlockAdmission):
    """Holds the waiting queue (FCFS) and the running set of one instance (admission order)."""

    def __init__(self, config: EngineConfig, cache: PrefixCache) -> None:
        self.config = config
        self.cache = cache
        self.waiting: deque[SequenceState] = deque()
        self.running: list[SequenceState] = []
        self.live: dict[str, SequenceState] = {}  # waiting or running, by request id
        self._unscheduled: list[SequenceState] = []  # admitted, not yet in any step
        self._admitted: list[SequenceState] = []  # admitted by the step now running: told of it as it ends
        self.tokens_generated = 0
        self.prefill_tokens = 0
        self.decode_tokens = 0
        self.prefix_cache_query_tokens = 0
        self.prefix_cache_hit_tokens = 0
        self.requests_finished = 0
        self.preemptions = 0
        self.host_cache_hit_tokens = 0

    def check_fits(self, state: SequenceState) -> None:
        final_len = state.prompt_len + state.end_position
        cfg = self.config
        if cfg.max_context is not None and final_len > cfg.max_context:
            raise EngineFull(f"{state.request_id}: {final_len} tokens exceed the context limit of {cfg.max_context}")
        if state.total_blocks > self.cache.capacity_blocks:
            raise EngineFull(
                f"{state.request_id}: needs {state.total_blocks} KV blocks of {cfg.block_size} tokens, "
                f"more than this instance's capacity of {self.cache.capacity_blocks}"
            )
        if cfg.max_waiting is not None and len(self.waiting) >= cfg.max_waiting:
            raise EngineFull(f"{state.request_id}: {len(self.waiting)} requests already waiting (max_waiting)")

    def enqueue(self, state: SequenceState) -> None:
        if state.request_id in self.live:
            raise ValueError(f"{state.request_id}: a sequence with this request id is already on this engine")
        self.waiting.append(state)
        self.live[state.request_id] = state

    def drop(self, state: SequenceState, status: Status, outcome: object) -> None:
        """Remove an unfinished sequence (cancel, stop) and free its blocks."""
        if state.status is Status.WAITING:
            self.waiting.remove(state)
        elif state.status is Status.RUNNING:
            self.running.remove(state)
        self.cache.release(state.request_id)
        del self.live[state.request_id]
        state.close(status, outcome)

    def plan(self, start_t: Seconds) -> StepPlan | None:
        """Grow running KV (preempting if it must), admit what fits, then fill the budget. None: nothing to do.

        The order follows vLLM V1's scheduler: running sequences first, decodes before chunks,
        then waiting ones, and none admitted in a step that had to preempt (docs/engine.md, "The step").
        """
        cfg = self.config
        budget = cfg.max_num_batched_tokens
        decodes: list[SequenceState] = []
        waiting_for_chunks = False
        for state in self.running:  # the per-step hot loop: properties inlined
            context_len, computed, limit = state.context_len, state.computed, state.limit
            if context_len - computed == 1 and computed:  # SequenceState.is_decode
                if limit is None or context_len - state.prompt_len < limit:
                    decodes.append(state)
            else:
                waiting_for_chunks = True
        if len(decodes) > budget:
            decodes = decodes[:budget]
        preempted = self._grow(decodes)
        if preempted:
            decodes = [s for s in decodes if s.status is Status.RUNNING]
        if not preempted and self.waiting:
            for state in self._admit():
                self._admitted.append(state)  # its cached prefix counts as computed from this step's end
                if not state.is_decode:
                    waiting_for_chunks = True
                elif not state.held and len(decodes) < budget:  # received KV: it decodes at once
                    decodes.append(state)
        budget -= len(decodes)
        chunks: list[tuple[SequenceState, int]] = []
        if waiting_for_chunks:
            cap = cfg.prefill_cap
            for state in self.running:
                if budget == 0:
                    break
                if state.status is not Status.RUNNING or state.is_decode or state.computable <= 0:
                    continue
                tokens = min(state.computable, cap, budget)
                if cfg.isolate_tail_chunks and tokens == state.computable and state.computed > state.chunk_origin:
                    if chunks:
                        break  # the tail runs alone: it closes this step and goes first in the next
                    if self._has_blocks(state, tokens):
                        chunks.append((state, tokens))
                    break
                if not self._has_blocks(state, tokens):
                    continue  # an extend that outgrew its blocks while nothing could be preempted
                chunks.append((state, tokens))
                budget -= tokens
        if not decodes and not chunks:
            return None
        for state in self._unscheduled:
            if state.status is Status.RUNNING and (state in decodes or any(state is c[0] for c in chunks)):
                state.stats.first_scheduled_t = start_t
        self._unscheduled = [
            s for s in self._unscheduled if s.status is Status.RUNNING and s.stats.first_scheduled_t is None
        ]
        load_tokens = 0
        for state in itertools.chain(decodes, (c[0] for c in chunks)):
            if state.pending_load_tokens:  # host-tier blocks load inside the first step that uses them
                load_tokens += state.pending_load_tokens
                state.pending_load_tokens = 0
        batch = StepBatch(
            tuple(Chunk(new_tokens=tokens, cached_tokens=state.computed) for state, tokens in chunks),
            tuple(state.computed + 1 for state in decodes),  # a decode attends over all KV, its own included
            host_load_tokens=load_tokens,
        )
        return StepPlan(batch, tuple(decodes), tuple(chunks))

    def complete(self, plan: StepPlan, end_t: Seconds) -> None:
        """Apply a finished step: advance KV, publish full blocks, emit tokens, retire finished sequences."""
        block_size, vocab_size = self.config.block_size, self.config.vocab_size
        running = Status.RUNNING
        retired = False
        for state, tokens in plan.chunks:
            if state.status is running:
                state.stats.chunks.append(tokens)
                self.prefill_tokens += tokens
        self.decode_tokens += len(plan.decodes)
        for state, tokens in itertools.chain(zip(plan.decodes, itertools.repeat(1)), plan.chunks):
            if state.status is not running:
                continue  # cancelled while the step ran
            computed = state.computed = state.computed + tokens
            if computed == state.kv_from and state.kv_tokens > computed:  # the missing prefix is back
                computed = state.computed = min(state.kv_tokens, state.context_len - 1)
            stats = state.stats
            stats.computed_tokens += tokens
            if computed // block_size > state.published_blocks:
                self._publish(state)
            # A step that reaches the end of the context produces the next token; one that an
            # extend overtook (context grew meanwhile) only added KV.
            if computed == state.context_len:
                position = computed - state.prompt_len
                token = token_at(state.key, position, vocab_size)
                state.context_len = computed + 1
                tail = state.tail
                tail.append(token)
                if len(tail) == block_size:
                    state.hash_tail()
                stats.generated_tokens += 1
                self.tokens_generated += 1
                if stats.first_token_t is None:
                    stats.first_token_t = end_t
                    if stats.prefill_done_t is None:
                        stats.prefill_done_t = end_t
                state.events.put(_new_tuple(TokenEvent, (position, token, end_t)))
                if position + 1 >= state.end_position:
                    self._finish(state, end_t)
                    retired = True
            elif stats.prefill_done_t is None and state.context_len - computed <= 1:
                stats.prefill_done_t = end_t  # held: context computed, no token produced
        for state in self._admitted:
            state.progressed()
        self._admitted.clear()
        for state, _ in plan.chunks:
            state.progressed()
        if retired:
            self.running = [s for s in self.running if s.status is running]

    def _finish(self, state: SequenceState, end_t: Seconds) -> None:
        state.stats.finished_t = end_t
        self.cache.release(state.request_id)
        del self.live[state.request_id]
        self.requests_finished += 1
        state.close(Status.FINISHED, FinishedEvent(state.stats))
