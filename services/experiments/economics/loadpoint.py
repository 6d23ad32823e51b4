"""One load point: a deployment under a workload at one load and seed, summarised (docs/results.md, "Economics").

A backend (the real-time mesh today, the simulator later) implements
`LoadPointRunner`; the search, the figures and the validity checks only see
`PointResult`, so they do not depend on how the point was produced.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Protocol

from services.experiments.goodput import LoadPoint
from services.scenario import Scenario
from services.types import Pipeline


@dataclass(frozen=True)
class Quantiles:
    p50: float | None
    p90: float | None
    p99: float | None


@dataclass(frozen=True)
class PointStats:
    """What the validity checks need (validity.py); None where a deployment has no such part."""

    prefill_busy: float | None = None  # share of the window the prefill engines computed
    prefill_hit: float | None = None  # prefix-cache hit share of prefill tokens served
    planned_hit: float | None = None  # the workload's planned mean hit
    md_batch_mean: float | None = None  # decode tokens per decode step on (main) decode
    md_kv_usage: float | None = None  # share of (main) decode's KV blocks in use
    wan_utilisation: float | None = None  # WAN bytes against what the line carries in the window
    rld_queue_max: int | None = None  # requests waiting on the relay
    rld_token_share: float | None = None  # share of output tokens the relay produced
    pipelines: dict[str, int] = field(default_factory=dict)  # requests per pipeline

    @property
    def singular_share(self) -> float | None:
        """Share of requests that ended on the relay (P-RLD: the singular early finish, docs/pdd.md)."""
        total = sum(self.pipelines.values())
        return self.pipelines.get(Pipeline.P_RLD.value, 0) / total if total else None


@dataclass(frozen=True)
class PointResult:
    load: float  # agents (population) or requests per second, as the runner was asked
    seed: int
    sent: int
    attainment: float  # share of requests within SLA
    goodput_rps: float  # requests within SLA per second
    request_rate_rps: float
    ttft_s: Quantiles
    tpot_s: Quantiles
    e2e_s: Quantiles
    stats: PointStats = PointStats()
    ttfts_s: tuple[float, ...] = ()  # every request's TTFT, for the CDFs
    stopped_at_verdict: bool = False  # its window ended once it had to fail (services/simulate/window_stop.py)

    def as_load_point(self) -> LoadPoint:
        return LoadPoint(self.load, self.attainment, self.goodput_rps)

    def as_dict(self) -> dict:
        """Plain JSON values; `from_dict` gives the same point back."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PointResult:
        quantiles = {name: Quantiles(**data[name]) for name in ("ttft_s", "tpot_s", "e2e_s")}
        return cls(**{**data, **quantiles, "stats": PointStats(**data["stats"]), "ttfts_s": tuple(data["ttfts_s"])})


class LoadPointRunner(Protocol):
    """Runs one load point. Deterministic given (scenario, workload, load, seed) wherever the backend can be."""

    backend: str  # "mesh" or "simulate"

    async def run_point(self, scenario: Scenario, workload: str, load: float, seed: int) -> PointResult: ...

    # A backend whose failing windows may end at their verdict has `stops_at_verdict` True and takes
    # `run_point(..., whole=True)` for a point whose whole window is read (its TTFTs compared).
