"""The economics question on the planner: optimum against optimum, the least cost to the baseline's goodput, and the
map of where PDD pays (docs/plan.md, "Economics").

- `optima`: each architecture's best deployment within the spec's budget (the report's: the intra-DC
  baseline's 88 GPU-A), by the screen;
- `least_cost`: the cheapest deployment of each architecture whose screen goodput reaches `target_rps`
  (the intra-DC PD optimum's own goodput: nothing is sized from a figure of the report);
- `gain_map`: PDD's BCR gain over the best other architecture, each at its optimum within the budget,
  over KV bytes per token x line rate x the B/A GPU price ratio. A line is priced per 10 Gbit/s port.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from services.plan.planner import screen_all
from services.plan.screen import Screened
from services.plan.spec import LineOffer, PlanSpec
from services.plan.workload import sample_workload

# KV bytes per token -> the pdd-paper variant holding that much (services/profiles/models.yaml)
KV_MODELS = {4392: "pdd-paper", 17568: "pdd-paper-kv17k", 46482: "pdd-paper-kv46k", 70028: "pdd-paper-kv70k"}
LINE_GBPS = (10, 20, 40, 100)
PRICE_RATIOS = (1.0, 1.27, 1.6)  # H200 against H100: equal, the profiles' (3.79 / 2.99), and 60% pricier
PORT_GBPS, PORT_PRICE_PER_HOUR = 10, 2.25  # AWS Direct Connect's dedicated 10G port (services/experiments/scaling.py)


def line_offer(gbps: float, delay_s: float = 0.01) -> LineOffer:
    return LineOffer(rate=gbps * 1e9, price_per_hour=math.ceil(gbps / PORT_GBPS) * PORT_PRICE_PER_HOUR, delay=delay_s)


def optima(spec: PlanSpec) -> dict[str, Screened | None]:
    """Each architecture's screened optimum for the spec's objective (None: nothing within it)."""
    screened = screen_all(spec, sample_workload(spec.workload))
    return {arch: rows[0] if rows else None for arch, rows in screened.items()}


def least_cost(spec: PlanSpec, target_rps: float) -> dict[str, Screened | None]:
    return optima(spec.model_copy(update={"budget_per_hour": None, "target_rps": target_rps}))


def pdd_gain(found: dict[str, Screened | None]) -> tuple[float | None, str | None]:
    """(PDD's BCR over the best other's, minus 1; that other), or None where either has no deployment."""
    others = {a: s for a, s in found.items() if a != "pdd" and s is not None and s.bcr > 0}
    pdd = found.get("pdd")
    if pdd is None or not others:
        return None, None
    best = max(others, key=lambda a: others[a].bcr)
    return pdd.bcr / others[best].bcr - 1, best


@dataclass(frozen=True)
class Cell:
    kv_bytes: int
    line_gbps: float
    price_ratio: float
    gain: float | None
    best_other: str | None
    pdd_binding: str | None


def gain_map(spec: PlanSpec) -> list[Cell]:
    """Every (KV bytes, line, price ratio) cell: the spec with that model, that one line and B priced at ratio x A."""
    a_price = spec.gpus[spec.dc_a].price_per_hour
    cells = []
    for kv_bytes, model in KV_MODELS.items():
        for gbps in LINE_GBPS:
            for ratio in PRICE_RATIOS:
                gpus = {**spec.gpus, spec.dc_b: spec.gpus[spec.dc_b].model_copy(
                    update={"price_per_hour": a_price * ratio})}
                cell_spec = spec.model_copy(update={"model": model, "gpus": gpus,
                                                    "wan": (line_offer(gbps, spec.wan[0].delay_s),)})
                found = optima(cell_spec)
                gain, other = pdd_gain(found)
                pdd = found.get("pdd")
                cells.append(Cell(kv_bytes, gbps, ratio, gain, other, pdd.binding_stage if pdd else None))
    return cells
