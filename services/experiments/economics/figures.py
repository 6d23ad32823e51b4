"""Cost, BCR and the headline figures of the economics experiment (docs/economics.md).

    BCR                = max goodput / cost per hour           (requests within SLA per second per $/h)
    goodput_gain       = G_pdd / G_intra - 1
    cost_reduction     = 1 - C_pdd / C_intra
    bcr_gain           = BCR_pdd / BCR_intra - 1 = (1 + goodput_gain) / (1 - cost_reduction) - 1
    ttft_p99_reduction = 1 - TTFT_p99,pdd / TTFT_p99,pd-cross  (at the same load)

The identity in bcr_gain is docs/pdd-system.md's; `identity_gap` checks that
figures computed independently satisfy it.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.experiments.economics.loadpoint import PointResult
from services.scenario import Scenario
from services.scenario.cost import cost_per_hour


@dataclass(frozen=True)
class Deployment:
    """One deployment's outcome: its cost, its max goodput and the point its TTFTs and checks are read at."""

    key: str
    scenario: Scenario
    goodput_rps: float | None
    reference: PointResult | None  # the point at the shared reference load
    knee: PointResult | None  # the highest point within SLA

    @property
    def cost_per_hour(self) -> float:
        return cost_per_hour(self.scenario)

    @property
    def bcr(self) -> float | None:
        return None if self.goodput_rps is None or not self.cost_per_hour else self.goodput_rps / self.cost_per_hour


def _gain(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b - 1


def headline(intra: Deployment, cross: Deployment | None, pdd: Deployment) -> dict[str, float | None]:
    """The figures `experiment economics --json` prints (PDD against the baseline, its TTFT against cross-DC PD;
    None without cross-DC PD)."""
    p99_pdd = pdd.reference.ttft_s.p99 if pdd.reference else None
    p99_cross = cross.reference.ttft_s.p99 if cross and cross.reference else None
    stats = pdd.knee.stats if pdd.knee else None
    return {
        "ttft_p99_reduction": None if p99_pdd is None or not p99_cross else 1 - p99_pdd / p99_cross,
        "goodput_gain": _gain(pdd.goodput_rps, intra.goodput_rps),
        "bcr_gain": _gain(pdd.bcr, intra.bcr),
        "cost_reduction": 1 - pdd.cost_per_hour / intra.cost_per_hour,
        "rld_token_share": stats.rld_token_share if stats else None,
        "singular_share": stats.singular_share if stats else None,
    }


def bcr_gain_from(goodput_gain: float, cost_reduction: float) -> float:
    return (1 + goodput_gain) / (1 - cost_reduction) - 1


def identity_gap(figures: dict[str, float | None]) -> float | None:
    """|bcr_gain - (1 + goodput_gain) / (1 - cost_reduction) + 1|; None when a figure is missing."""
    if None in (figures.get("bcr_gain"), figures.get("goodput_gain"), figures.get("cost_reduction")):
        return None
    return abs(figures["bcr_gain"] - bcr_gain_from(figures["goodput_gain"], figures["cost_reduction"]))
