"""The bathtub: prefill throughput against the prefix hit rate, with chunked prefill, on the engine's own planner.

No mesh and no sleeps: the services' StepPlanner plans every step and the
roofline clock says how long it lasts, in emulated time, so a curve of a few
hundred points takes seconds and is exactly reproducible. Every request of a
point has the same context and the same hit rate h, so its uncached part
u = round(C (1 - h)) is computed as floor(u / chunk) full chunks and a tail of
r = u mod chunk tokens (docs/engine.md, "Chunk boundaries and the bathtub").
A small r is a step of fixed costs for a few tokens; when the planner keeps a
tail out of other sequences' chunks (EngineConfig.isolate_tail_chunks) that
waste shows as a dip (docs/results.md §Bathtub).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from services.engine.prefix_cache import PrefixCache
from services.engine.roofline import RooflineClock
from services.engine.sequence import Sequence, SequenceState
from services.engine.step_planner import EngineConfig, StepPlanner
from services.profiles import load_model

_CAPACITY_BLOCKS = 1 << 22  # KV is never the limit here: only chunking is studied
_ATTAINMENT = 0.9


@dataclass(frozen=True)
class PrefillSetup:
    """One prefill instance and the requests it serves at every point of the curve."""

    model: str = "pdd-paper"
    gpu: str = "h100-sxm"
    tp: int = 16
    context_tokens: int = 65536
    chunk_size: int = 8192
    max_batched_tokens: int = 16384
    isolate_tail_chunks: bool = True
    requests: int = 16  # served together, in lock-step, for the throughput
    ttft_sla_s: float = 5.0


@dataclass(frozen=True)
class BathtubPoint:
    hit_rate: float
    tail_tokens: int  # r: the last chunk of each request
    throughput_rps: float  # requests prefilled per second, all arriving at once
    compute_tokens_per_s: float  # uncached tokens per second: how well the GPU is used
    goodput_rps: float | None  # highest Poisson rate with >= 90% of TTFTs within the SLA


def tail_tokens(setup: PrefillSetup, hit_rate: float) -> int:
    uncached = uncached_tokens(setup, hit_rate)
    return uncached % setup.chunk_size if uncached > setup.chunk_size else uncached


def uncached_tokens(setup: PrefillSetup, hit_rate: float) -> int:
    # the last context token is always computed (docs/engine.md, "API")
    return max(1, round(setup.context_tokens * (1.0 - hit_rate)))


class PrefillEmulator:
    """Drives a StepPlanner with the roofline clock in emulated time."""

    def __init__(self, setup: PrefillSetup) -> None:
        self.setup = setup
        model = load_model(setup.model)
        self.vocab_size = model.vocab_size
        self.clock = RooflineClock.for_names(setup.gpu, setup.model, tp=setup.tp)
        self.config = EngineConfig(kv_capacity_blocks=_CAPACITY_BLOCKS, vocab_size=model.vocab_size,
                                   chunk_size=setup.chunk_size, max_num_batched_tokens=setup.max_batched_tokens,
                                   max_running=256, isolate_tail_chunks=setup.isolate_tail_chunks)
        self._context = [(i * 7919) % model.vocab_size for i in range(setup.context_tokens)]

    def _state(self, index: int, hit_rate: float, arrival_s: float) -> SequenceState:
        # A distinct first token gives every request its own block hashes, so none hits the KV an
        # earlier one published: the hit is exactly the `kv_tokens` the point asks for.
        context = [index % self.vocab_size] + self._context[1:]
        kv = len(context) - uncached_tokens(self.setup, hit_rate)
        seq = Sequence(request_id=f"r{index}", context=context, prompt_len=len(context), kv_tokens=kv, generate=1,
                       first_position=0, seed=0, fingerprint=index)
        return SequenceState(seq, self.config.block_size, self.vocab_size, arrival_s)

    def serve(self, hit_rate: float, arrivals: list[float]) -> list[float]:
        """Time to first token of each request (in arrival order), arrivals in emulated seconds."""
        planner = StepPlanner(self.config, PrefixCache(_CAPACITY_BLOCKS, self.config.block_size))
        states = [self._state(i, hit_rate, t) for i, t in enumerate(arrivals)]
        now, next_arrival = 0.0, 0
        while True:
            while next_arrival < len(states) and arrivals[next_arrival] <= now:
                planner.enqueue(states[next_arrival])
                next_arrival += 1
            plan = planner.plan(now)
            if plan is None:
                if next_arrival == len(states):
                    break
                now = arrivals[next_arrival]  # idle until the next request
                continue
            now += self.clock.step_seconds(plan.batch)
            planner.complete(plan, now)
        return [s.stats.first_token_t - t for s, t in zip(states, arrivals)]

    def throughput(self, hit_rate: float) -> tuple[float, float]:
        """(requests per second, uncached tokens per second) with every request arriving at once."""
        n = self.setup.requests
        makespan = max(self.serve(hit_rate, [0.0] * n))
        return n / makespan, n * uncached_tokens(self.setup, hit_rate) / makespan

    def goodput(self, hit_rate: float, capacity_rps: float, requests: int, rng: random.Random,
                iterations: int = 6) -> float:
        """Max goodput rate by bisection, with the same random gaps at every rate (common random numbers)."""
        gaps = [rng.expovariate(1.0) for _ in range(requests)]

        def attains(rate: float) -> bool:
            arrivals = list(_cumulative(g / rate for g in gaps))
            ttfts = self.serve(hit_rate, arrivals)
            return sum(t <= self.setup.ttft_sla_s for t in ttfts) >= _ATTAINMENT * len(ttfts)

        low, high = 0.0, 1.5 * capacity_rps
        for _ in range(iterations):
            mid = (low + high) / 2
            low, high = (mid, high) if attains(mid) else (low, mid)
        return low


def _cumulative(values) -> list[float]:
    total, out = 0.0, []
    for v in values:
        total += v
        out.append(total)
    return out


def hit_grid(step: float, top: float = 0.99) -> list[float]:
    count = int(math.floor(top / step + 1e-9))
    return [round(i * step, 6) for i in range(count + 1)]


def bathtub(setup: PrefillSetup, hit_rates: list[float], goodput_requests: int = 0, seed: int = 0) -> list[BathtubPoint]:
    """One curve; goodput (slower) only when `goodput_requests` > 0."""
    emulator = PrefillEmulator(setup)
    rng = random.Random(seed)
    points = []
    for hit in hit_rates:
        rps, tokens_per_s = emulator.throughput(hit)
        goodput = emulator.goodput(hit, rps, goodput_requests, random.Random(rng.getrandbits(64))) \
            if goodput_requests else None
        points.append(BathtubPoint(hit, tail_tokens(setup, hit), rps, tokens_per_s, goodput))
    return points


def predicted_dips(setup: PrefillSetup, hit_rates: list[float], small_tail_fraction: float = 0.1) -> list[float]:
    """Grid hit rates whose tail is a small share of a chunk after at least one full chunk."""
    return [h for h in hit_rates
            if uncached_tokens(setup, h) > setup.chunk_size
            and 0 < tail_tokens(setup, h) <= small_tail_fraction * setup.chunk_size]


def dip_depths(points: list[BathtubPoint], dips: list[float]) -> dict[float, float]:
    """For each predicted dip that is a local minimum of compute throughput: 1 - it / its higher neighbour."""
    index = {p.hit_rate: i for i, p in enumerate(points)}
    depths = {}
    for hit in dips:
        i = index[hit]
        if i == 0 or i + 1 >= len(points):
            continue
        here = points[i].compute_tokens_per_s
        below, above = points[i - 1].compute_tokens_per_s, points[i + 1].compute_tokens_per_s
        depths[hit] = 1.0 - here / max(below, above) if here <= min(below, above) else 0.0
    return depths


def with_policy(setup: PrefillSetup, isolate: bool) -> PrefillSetup:
    return replace(setup, isolate_tail_chunks=isolate)
