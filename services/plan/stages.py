"""What one instance of a layout does, from the roofline clock and the sizing the engines use themselves.

    prefill_tokens_per_s  = budget / step_seconds(one chunk of `budget` tokens over the mean cached prefix)
    decode_slots          = the largest B <= min(KV sequences, running cap) with step_seconds(B decodes) <= TPOT
    decode_rps            = decode_slots / (mean output tokens x step_seconds(decode_slots decodes))

(docs/plan.md, "The screen"). The step time is services/engine/roofline.py's and the KV
capacity and running cap services/scenario/sizing.py's, for the same pool a scenario
would hold: the screen has no model of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from services.engine.batch import Chunk, StepBatch
from services.engine.roofline import RooflineClock
from services.profiles import load_gpu, load_model
from services.scenario import EngineSpec, PoolSpec, Scenario
from services.scenario.sizing import instance_sizing
from services.types import Mode, Role


@dataclass(frozen=True, order=True)
class Layout:
    """How one instance splits the model over its GPUs."""

    gpu: str
    tp: int
    dp_attention: int = 1
    ep: int = 1

    def label(self) -> str:
        extra = (f" DP{self.dp_attention}" if self.dp_attention > 1 else "") + (f" EP{self.ep}" if self.ep > 1 else "")
        return f"{self.gpu} TP{self.tp}{extra}"


@dataclass(frozen=True)
class Capacity:
    kv_tokens: int  # KV the instance holds
    max_running: int
    prefill_tokens_per_s: float
    decode_slots: int  # sequences decoding at once within the TPOT limit and the KV
    decode_step_s: float  # one decode step at decode_slots


def _probe(model: str, layout: Layout, budget: int) -> tuple[Scenario, PoolSpec]:
    """A one-pool scenario holding `layout`: what instance_sizing reads its sizes from."""
    pool = PoolSpec(name="probe", role=Role.COLOCATED, dc="a", gpu=layout.gpu, tp=layout.tp,
                    dp_attention=layout.dp_attention, ep=layout.ep)
    return Scenario(name="probe", mode=Mode.COLOCATED, model=model, pools=(pool,),
                    engine=EngineSpec(max_batched_tokens=budget)), pool


def fits(model: str, layout: Layout) -> bool:
    """The layout suits the model and its weights leave room for KV."""
    try:
        scenario, pool = _probe(model, layout, 8192)
        instance_sizing(scenario, pool)
        RooflineClock(load_gpu(layout.gpu), load_model(model), layout.tp, dp_attention=layout.dp_attention,
                      ep=layout.ep)
    except ValueError:
        return False
    return True


def layouts(model: str, gpu: str, max_gpus: int = 64) -> list[Layout]:
    """Every layout of `gpu` that fits `model`: each TP degree, with DP attention (MLA) and EP (MoE) on or off."""
    profile = load_model(model)
    found = []
    for tp in profile.tensor_parallel_degrees():
        if tp > max_gpus or tp & (tp - 1):  # powers of two: the degrees serving engines take
            continue
        dps = (1, tp) if profile.mla is not None and tp > 1 else (1,)
        eps = (1, tp) if profile.moe is not None and tp > 1 else (1,)
        found += [layout for dp in dps for ep in eps if fits(model, layout := Layout(gpu, tp, dp, ep))]
    return found


@lru_cache(maxsize=4096)
def capacity(model: str, layout: Layout, budget: int, cached_tokens: int, context_tokens: int, output_tokens: int,
             tpot_s: float) -> Capacity:
    """One instance's stage capacities for requests of `context_tokens` (prompt plus half the output) that reuse
    `cached_tokens` of prefix and generate `output_tokens`."""
    scenario, pool = _probe(model, layout, budget)
    sizing = instance_sizing(scenario, pool)
    clock = RooflineClock(load_gpu(layout.gpu), load_model(model), layout.tp, dp_attention=layout.dp_attention,
                          ep=layout.ep)
    kv_tokens = sizing.kv_capacity_blocks * scenario.engine.block_size
    prefill_s = clock.step_seconds(StepBatch(chunks=(Chunk(budget, cached_tokens),)))
    per_sequence = context_tokens + output_tokens / 2  # a decoding sequence's KV, on average over its life
    most = max(1, min(sizing.max_running, int(kv_tokens / max(1, per_sequence))))

    def step(slots: int) -> float:
        return clock.step_seconds(StepBatch(decode_contexts=(context_tokens,) * slots))

    low, high = 0, most  # the largest slot count whose step fits the TPOT limit
    if step(most) <= tpot_s:
        low = most
    while high - low > 1 and low < most:
        middle = (low + high) // 2
        low, high = (middle, high) if step(middle) <= tpot_s else (low, middle)
    slots = max(low, 0)
    return Capacity(kv_tokens, sizing.max_running, budget / prefill_s, slots, step(slots) if slots else tpot_s)
