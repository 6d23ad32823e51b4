"""Faults made of traffic rather than broken parts: relay overload and slow or vanishing consumers."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.chaos.faults import POLL_S, Window
from services.chaos.outcomes import Outcome
from services.chaos.slow import slow_completion
from services.chaos.traffic import Traffic
from services.types import Role
from services.scenario.sizing import instance_sizing

if TYPE_CHECKING:
    from services.chaos.runner import RunContext


@dataclass(frozen=True)
class RelayOverload:
    """Low-hit traffic offered far above what the relay tier can hold, for `duration_s`.

    The relay's queue is sampled all along: (running + waiting) / what it can run at once.
    """

    workload: str
    rate: float
    duration_s: float
    burst: int = 1  # requests arriving together, as an agent's fan-out of tool calls does
    name: str = "relay-overload"

    async def apply(self, run: RunContext) -> Window:
        relay = run.mesh.services(Role.RELAY_DECODE)[0]
        capacity = relay.pool.count * instance_sizing(run.mesh.scenario, relay.pool).max_running
        flood = Traffic(run.target, self.workload, self.rate, "overload", run.seed + 1, self.burst)
        run.traffics.append(flood)
        stop = asyncio.Event()
        start = run.now()
        sender = asyncio.create_task(flood.run(stop))
        peak_held, peak_waiting, samples = 0, 0, 0
        try:
            while run.now() - start < self.duration_s:
                stats = await run.mesh.stats(run.http, relay.name)
                held = sum(s["running"] + s["waiting"] for s in stats["instances"].values())
                peak_held = max(peak_held, held)
                peak_waiting = max(peak_waiting, sum(s["waiting"] for s in stats["instances"].values()))
                samples += 1
                await asyncio.sleep(POLL_S)  # the sampling period of the relay's queue
        finally:
            stop.set()
            await sender
        return Window(self.name, start, run.now(), {
            "relay_capacity": capacity, "relay_peak_held": peak_held, "relay_peak_waiting": peak_waiting,
            "relay_peak_load": round(peak_held / capacity, 3), "samples": samples,
            "offered_rps": self.rate, "burst": self.burst})


@dataclass(frozen=True)
class SlowConsumers:
    """For `duration_s`, every `every_s` one client that reads its stream slowly and one that hangs up mid-stream."""

    duration_s: float
    every_s: float
    prompt_tokens: int = 2048
    slow_tokens: int = 600
    name: str = "slow-consumers"

    async def apply(self, run: RunContext) -> Window:
        rng = random.Random(run.seed + 2)
        tasks: set[asyncio.Task] = set()
        start = run.now()
        count = 0
        while run.now() - start < self.duration_s:
            for tag, hang_up in (("slow-reader", None), ("hang-up", rng.randint(0, 30))):
                prompt = [rng.randrange(32000) for _ in range(self.prompt_tokens)]
                outcome = Outcome(f"{tag}-{count}", tag)
                run.extra.append(outcome)
                tasks.add(asyncio.create_task(slow_completion(
                    run.target, outcome, prompt, self.slow_tokens, read_bytes=512, pause_s=0.02,
                    hang_up_after=hang_up)))
            count += 1
            await asyncio.sleep(self.every_s)  # the pacing of the slow clients
        end = run.now()
        if tasks:
            await asyncio.wait(tasks)  # each bounded by the client deadline
        return Window(self.name, start, end, {"slow_readers": count, "hang_ups": count})
