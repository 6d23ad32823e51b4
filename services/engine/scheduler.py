"""One emulated instance: an asyncio loop that runs steps for as long as the injected clock says.

The clock is a plain callable (StepBatch -> seconds), so the engine does not care
whether it is the roofline model or a test's linear function. A busy engine starts
each step at the previous step's deadline and ends it in a timer at the absolute deadline
start + seconds, so timer error never accumulates (docs/engine.md, "Step timing").
"""

from __future__ import annotations

import asyncio
import contextvars
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass

from services.engine.batch import StepBatch
from services.engine.prefix_cache import PrefixCache
from services.engine.handle import SequenceHandle
from services.engine.sequence import EngineFull, EngineStopped, Sequence, SequenceState, Status
from services.engine.step_planner import EngineConfig, StepPlan, StepPlanner

__all__ = ["Engine", "EngineConfig", "EngineFull", "EngineStats", "EngineStopped", "SequenceHandle"]

StepSeconds = Callable[[StepBatch], float]


# vLLM's buckets for vllm:iteration_tokens_total, the tokens one step computes (its v1 metrics loggers).
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


@dataclass(frozen=True, slots=True)
class EngineStats:
    """Plain numbers for Prometheus: gauges first, then counters (monotonic since start)."""

    running: int
    waiting: int
    kv_blocks_total: int
    kv_blocks_used: int
    kv_blocks_free: int  # holding nothing
    kv_blocks_cached: int  # published, referenced or not
    kv_blocks_evictable: int
    host_blocks_total: int  # host-memory prefix tier (0: none)
    host_blocks_cached: int
    steps: int
    busy_seconds: float
    late_seconds_max: float  # worst wake-up after a step deadline: the emulator's own overhead
    tokens_generated: int
    prefill_tokens: int
    decode_tokens: int
    prefix_cache_query_tokens: int
    prefix_cache_hit_tokens: int  # found in device memory
    host_cache_hit_tokens: int  # found in the host-memory tier and loaded back
    requests_finished: int
    requests_cancelled: int
    evictions: int
    host_evictions: int
    preemptions: int  # running sequences whose KV was freed for room and recomputed (vLLM's num_preemptions)
    iteration_tokens: tuple[int, ...]  # steps per ITERATION_TOKEN_BUCKETS bucket (then past the last), not cumulative
    iteration_tokens_sum: int

    @property
    def kv_usage(self) -> float:
        return self.kv_blocks_used / self.kv_blocks_total


class Engine:
    """One emulated instance: FCFS admission with preemption, continuous batching, chunked prefill, tiered prefix cache."""

    def __init__(self, config: EngineConfig, step_seconds: StepSeconds, name: str = "engine") -> None:
        self.config = config
        self.name = name
        self.cache = PrefixCache(config.kv_capacity_blocks, config.block_size, config.host_cache_blocks)
        self._planner = StepPlanner(config, self.cache)
        self._step_seconds = step_seconds
        self._task: asyncio.Task[None] | None = None
        self._idle = False  # planned nothing: the next input wakes the engine
        self._next: asyncio.Handle | None = None  # the pending wake-up or step end
        self._failed: asyncio.Future[None] | None = None
        self._context = contextvars.Context()  # its task's, where the steps run (what they start is its)
        self._stopped = False
        self._deadline: float | None = None  # end of the previous step while busy
        self._input_t = float("-inf")  # loop time of the latest submit, extend or limit change
        self._steps = 0
        self._iteration_tokens = [0] * (len(ITERATION_TOKEN_BUCKETS) + 1)
        self._iteration_tokens_sum = 0
        self._busy_seconds = 0.0
        self._late_max = 0.0
        self._cancelled = 0
        self._step_future: asyncio.Future[None] | None = None

    @property
    def block_size(self) -> int:
        return self.config.block_size

    @property
    def load(self) -> int:
        """Sequences admitted or queued: the pool balances on this."""
        return len(self._planner.running) + len(self._planner.waiting)

    def cached_prefix_tokens(self, block_hashes: list[int]) -> int:
        return self.cache.held_prefix_tokens(block_hashes)

    def submit(self, seq: Sequence) -> SequenceHandle:
        if self._stopped:
            raise EngineStopped(f"engine {self.name} is stopped; cannot take {seq.request_id}")
        now = asyncio.get_running_loop().time()
        state = SequenceState(seq, self.config.block_size, self.config.vocab_size, now)  # validates seq
        self._planner.check_fits(state)
        self._planner.enqueue(state)
        self._note_input()
        return SequenceHandle(self, state)

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"engine {self.name} already started")
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"engine-{self.name}")

    async def stop(self) -> None:
        """Cancel and await the loop, then fail every unfinished sequence with EngineStopped."""
        self._stopped = True
        task, self._task = self._task, None
        try:
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        finally:
            self._fail_all(f"engine {self.name} stopped before the request finished")

    def stats(self) -> EngineStats:
        planner, cache = self._planner, self.cache
        return EngineStats(
            running=len(planner.running), waiting=len(planner.waiting),
            kv_blocks_total=cache.capacity_blocks, kv_blocks_used=cache.used_blocks,
            kv_blocks_free=cache.free_blocks, kv_blocks_cached=cache.cached_blocks,
            kv_blocks_evictable=cache.evictable_blocks,
            host_blocks_total=cache.host_capacity_blocks, host_blocks_cached=cache.host_cached_blocks,
            steps=self._steps, busy_seconds=self._busy_seconds, late_seconds_max=self._late_max,
            tokens_generated=planner.tokens_generated, prefill_tokens=planner.prefill_tokens,
            decode_tokens=planner.decode_tokens, prefix_cache_query_tokens=planner.prefix_cache_query_tokens,
            prefix_cache_hit_tokens=planner.prefix_cache_hit_tokens,
            host_cache_hit_tokens=planner.host_cache_hit_tokens, requests_finished=planner.requests_finished,
            requests_cancelled=self._cancelled, evictions=cache.evictions, host_evictions=cache.host_evictions,
            preemptions=planner.preemptions, iteration_tokens=tuple(self._iteration_tokens),
            iteration_tokens_sum=self._iteration_tokens_sum,
        )

    def _step_done(self) -> asyncio.Future[None]:
        """A future resolved when the current step (or the next one, when idle) completes."""
        if self._step_future is None or self._step_future.done():
            self._step_future = asyncio.get_running_loop().create_future()
        return self._step_future

    def _note_input(self) -> None:
        loop = asyncio.get_running_loop()
        self._input_t = loop.time()
        if self._idle:  # woken after this loop pass, as a task waiting on an event would be
            self._idle = False
            self._next = loop.call_soon(self._guarded, self._plan_next, context=self._context)

    def _end(self, state: SequenceState, status: Status, outcome: object) -> None:
        if state.status not in (Status.WAITING, Status.RUNNING):
            return
        self._planner.drop(state, status, outcome)
        if status is Status.CANCELLED:
            self._cancelled += 1
        if self._step_future is not None and not self._step_future.done():
            self._step_future.set_result(None)  # lets caught_up() see that the sequence ended
        self._note_input()  # freed blocks may admit a waiting sequence

    def _fail_all(self, reason: str) -> None:
        for state in [*self._planner.running, *self._planner.waiting]:
            self._end(state, Status.FAILED, EngineStopped(f"{reason}: {state.request_id}"))

    async def _run(self) -> None:
        """The engine's life. Its steps run as the loop's callbacks (a step ends in a timer, not in a
        task's wake-up: a step is the simulation's commonest event); this task holds them, so
        cancelling it (stop, a kill of the process) stops them, and a step's failure ends it."""
        self._failed = asyncio.get_running_loop().create_future()
        self._context = contextvars.copy_context()
        self._guarded(self._plan_next)
        try:
            await self._failed
        finally:
            if self._next is not None:
                self._next.cancel()
            self._idle = False

    def _guarded(self, step: Callable[..., None], *args: object) -> None:
        try:
            step(*args)
        except Exception as exc:
            self._fail_all(f"engine {self.name} loop failed ({exc!r})")
            if self._failed is not None and not self._failed.done():
                self._failed.set_exception(exc)

    def _plan_next(self) -> None:
        # Back-to-back steps chain their deadlines, so a late wake-up delays nothing after
        # it; a step after an idle spell starts at "now", and no step starts before the
        # last input (submit, extend, limit change) that may have shaped it.
        loop = asyncio.get_running_loop()
        start = loop.time() if self._deadline is None else max(self._deadline, self._input_t)
        plan = self._planner.plan(start)
        if plan is None:
            self._deadline, self._next, self._idle = None, None, True
            return
        seconds = self._step_seconds(plan.batch)
        if not seconds >= 0.0:
            raise ValueError(f"step clock returned {seconds!r} seconds for {plan.batch}")
        deadline = start + seconds
        delay = deadline - loop.time()
        if delay > 0.0:  # asyncio.sleep's own arithmetic
            self._next = loop.call_at(loop.time() + delay, self._guarded, self._step_end, plan, deadline, seconds,
                                      context=self._context)
        else:
            self._next = loop.call_soon(self._guarded, self._step_end, plan, deadline, seconds, context=self._context)

    def _step_end(self, plan: StepPlan, deadline: float, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self._late_max = max(self._late_max, loop.time() - deadline)
        self._deadline = deadline
        self._steps += 1
        tokens = plan.batch.new_tokens
        self._iteration_tokens[bisect_left(ITERATION_TOKEN_BUCKETS, tokens)] += 1  # `le`: a bound holds its own
        self._iteration_tokens_sum += tokens
        self._busy_seconds += seconds
        self._planner.complete(plan, deadline)
        if self._step_future is not None and not self._step_future.done():
            self._step_future.set_result(None)
        self._plan_next()
