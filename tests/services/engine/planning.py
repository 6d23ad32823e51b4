"""Driving a StepPlanner by hand, one planned and completed step at a time."""

from __future__ import annotations

from services.engine.prefix_cache import PrefixCache
from services.engine.sequence import SequenceState, TokenEvent
from services.engine.step_planner import EngineConfig, StepPlanner
from tests.services.engine.conftest import VOCAB, fresh, prompt


def planner(**overrides) -> StepPlanner:
    config = EngineConfig(**({"kv_capacity_blocks": 4096, "vocab_size": VOCAB} | overrides))
    return StepPlanner(config, PrefixCache(config.kv_capacity_blocks, config.block_size, config.host_cache_blocks))


def submit(p: StepPlanner, request_id: str, length: int, generate: int, salt: int = 0) -> SequenceState:
    state = SequenceState(fresh(request_id, prompt(length, salt), generate), p.config.block_size, VOCAB, 0.0)
    p.enqueue(state)
    return state


def step(p: StepPlanner, t: float = 0.0):
    plan = p.plan(t)
    assert plan is not None, "nothing was scheduled"
    p.complete(plan, t + 1.0)
    return plan


def tokens_of(state: SequenceState) -> list[int]:
    out = []
    while state.events._items:
        event = state.events._items.popleft()
        if isinstance(event, TokenEvent):
            out.append(event.token_id)
    return out
