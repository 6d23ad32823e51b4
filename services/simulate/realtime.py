"""Can this machine run a scenario as a real-time mesh? An estimate from the decode tier's capacity.

Every output token costs the emulator about 0.35 ms of CPU across decode, router
and client (measured, docs/experiments.md, "Time dilation"). A
deployment whose decode tier can emit R tokens/s within the SLA's TPOT thus
needs about R x 0.35 ms / time_dilation cores to be driven to capacity in real
time (docs/simulate.md, "Real time or virtual time").
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from services.engine.batch import StepBatch
from services.engine.roofline import RooflineClock
from services.profiles import load_model
from services.scenario.model import Scenario
from services.scenario.sizing import instance_sizing
from services.types import Role

CPU_SECONDS_PER_TOKEN = 0.35e-3  # docs/experiments.md, "Time dilation"
REPORT_CONTEXT = 65536  # the report's agentic context; the decode batch is counted at it
REFUSE_FACTOR = 2.0  # beyond twice the machine, a real-time run measures the emulator, not the model


def instance_tokens_per_s(scenario: Scenario, pool_name: str) -> float:
    """Output tokens/s of one instance at the largest batch of full-context sequences within the TPOT."""
    pool = next(p for p in scenario.pools if p.name == pool_name)
    context = min(REPORT_CONTEXT, load_model(scenario.model).max_context)
    sizing = instance_sizing(scenario, pool)
    most = max(1, min(sizing.kv_capacity_blocks * scenario.engine.block_size // context, sizing.max_running))
    clock = RooflineClock.for_names(pool.gpu, scenario.model, pool.tp, dp_attention=pool.dp_attention, ep=pool.ep,
                                    **pool.layout)

    def step(batch: int) -> float:
        return clock.step_seconds(StepBatch(decode_contexts=(context,) * batch))

    low, high = 1, most  # step time grows with the batch: bisect for the largest within the TPOT
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if step(mid) <= scenario.sla.tpot_s else (low, mid - 1)
    return low / step(low)


@dataclass(frozen=True, slots=True)
class RealtimeFit:
    tokens_per_s: float
    needed_cores: float
    cores: int
    scenario: str

    @property
    def fits(self) -> bool:
        return self.needed_cores <= self.cores

    @property
    def refused(self) -> bool:
        return self.needed_cores > REFUSE_FACTOR * self.cores

    def message(self) -> str:
        dilation = math.ceil(self.needed_cores / self.cores)
        return (
            f"{self.scenario}: its decode tier can emit about {self.tokens_per_s:,.0f} tokens/s within the SLA's "
            f"TPOT; at {CPU_SECONDS_PER_TOKEN * 1e3:.2f} ms of emulator CPU per token a real-time mesh needs about "
            f"{self.needed_cores:.1f} cores and this machine has {self.cores}. Run it in virtual time "
            f"(docs/simulate.md), or slow the mesh down with --set time_dilation={dilation} or more"
        )


def realtime_fit(scenario: Scenario, cores: int | None = None) -> RealtimeFit:
    decoding = [p for p in scenario.pools if p.role is not Role.PREFILL]
    tokens = sum(p.count * instance_tokens_per_s(scenario, p.name) for p in decoding)
    cores = cores or len(os.sched_getaffinity(0))
    return RealtimeFit(tokens, tokens * CPU_SECONDS_PER_TOKEN / scenario.time_dilation, cores, scenario.name)
