"""Shared pieces of the engine tests: a recording step clock, an engine factory, event collection."""

from __future__ import annotations

import asyncio

import pytest

from services.engine.batch import StepBatch
from services.engine.scheduler import Engine, EngineConfig, SequenceHandle
from services.engine.sequence import FinishedEvent, Sequence, TokenEvent

VOCAB = 1000
EVENT_TIMEOUT_S = 10.0  # generous: only a hang should ever reach it


class RecordingClock:
    """A deterministic step clock: fixed seconds per step plus seconds per token; keeps every batch."""

    def __init__(self, per_step_s: float = 0.001, per_token_s: float = 0.0) -> None:
        self.per_step_s = per_step_s
        self.per_token_s = per_token_s
        self.batches: list[StepBatch] = []

    def __call__(self, batch: StepBatch) -> float:
        self.batches.append(batch)
        return self.per_step_s + self.per_token_s * batch.new_tokens


def prompt(length: int, salt: int = 0) -> list[int]:
    return [(i * 7 + salt * 131 + 3) % VOCAB for i in range(length)]


def fresh(request_id: str, ids: list[int], generate: int, seed: int = 0) -> Sequence:
    """A new request: the whole context is the prompt, nothing received."""
    return Sequence(request_id, ids, prompt_len=len(ids), kv_tokens=0, generate=generate, first_position=0, seed=seed)


async def collect(handle: SequenceHandle) -> tuple[list[TokenEvent], FinishedEvent | None]:
    """Every event of a handle until its stream ends; fails the test instead of hanging."""

    async def drain() -> tuple[list[TokenEvent], FinishedEvent | None]:
        tokens: list[TokenEvent] = []
        async for event in handle.events():
            if isinstance(event, FinishedEvent):
                return tokens, event
            tokens.append(event)
        return tokens, None

    return await asyncio.wait_for(drain(), EVENT_TIMEOUT_S)


async def next_tokens(handle: SequenceHandle, count: int) -> list[TokenEvent]:
    """The next `count` token events of a handle that keeps running."""
    stream = handle.events()
    out: list[TokenEvent] = []
    while len(out) < count:
        event = await asyncio.wait_for(anext(stream), EVENT_TIMEOUT_S)
        assert isinstance(event, TokenEvent), event
        out.append(event)
    await stream.aclose()
    return out


@pytest.fixture
async def make_engine():
    engines: list[Engine] = []

    async def factory(clock=None, *, start: bool = True, name: str = "e", **overrides) -> Engine:
        settings = {"kv_capacity_blocks": 4096, "vocab_size": VOCAB} | overrides
        engine = Engine(EngineConfig(**settings), clock or RecordingClock(), name=name)
        if start:
            await engine.start()
        engines.append(engine)
        return engine

    yield factory
    for engine in reversed(engines):
        await engine.stop()
