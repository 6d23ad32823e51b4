"""The engine's step loop on the virtual clock: step ends are the roofline's predictions, never late."""

from __future__ import annotations

import asyncio
import itertools
import time

from services.engine.batch import StepBatch
from services.engine.roofline import RooflineClock
from services.engine.scheduler import Engine, EngineConfig
from services.engine.sequence import FinishedEvent, Sequence
from services.simulate.clock import run_virtual
from tests.tolerance import assert_at_most

VOCAB = 32000


class PredictedSteps:
    """The roofline as the step clock, keeping each prediction for the test to add up."""

    def __init__(self) -> None:
        self.roofline = RooflineClock.for_names("h100-sxm", "llama3-8b")
        self.seconds: list[float] = []

    def __call__(self, batch: StepBatch) -> float:
        seconds = self.roofline.step_seconds(batch)
        self.seconds.append(seconds)
        return seconds


async def _serve(steps: PredictedSteps) -> tuple[list[float], Engine]:
    engine = Engine(EngineConfig(kv_capacity_blocks=8192, vocab_size=VOCAB), steps, name="virtual")
    await engine.start()
    try:
        # All submitted at t=0: the engine stays busy, so every step starts at the previous end.
        handles = [
            engine.submit(Sequence(f"r{i}", [(7 * j + i) % VOCAB for j in range(prompt)], prompt, 0, out, 0, seed=i))
            for i, (prompt, out) in enumerate([(3000, 40), (12000, 25), (500, 60)])
        ]
        token_times: list[float] = []

        async def drain(handle) -> None:
            async for event in handle.events():
                if not isinstance(event, FinishedEvent):
                    token_times.append(event.t)

        await asyncio.wait_for(asyncio.gather(*(drain(h) for h in handles)), timeout=600.0)
        return token_times, engine
    finally:
        await engine.stop()


def test_engine_steps_end_exactly_where_the_roofline_says():
    steps = PredictedSteps()
    started = time.process_time()
    token_times, engine = run_virtual(_serve(steps))
    cpu = time.process_time() - started
    stats = engine.stats()
    step_ends = list(itertools.accumulate(steps.seconds))
    assert stats.steps == len(steps.seconds) > 60
    assert stats.late_seconds_max == 0.0  # virtual time never wakes a step late
    assert stats.busy_seconds == step_ends[-1]
    # every token carries the end of a step, and the last one the end of the last step
    ends = set(step_ends)
    assert all(t in ends for t in token_times)
    assert max(token_times) == step_ends[-1]
    assert_at_most(cpu, 5.0, "CPU seconds for the whole run")
