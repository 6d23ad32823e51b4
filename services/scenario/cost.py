"""What a deployment costs per hour (docs/design: cost = sum of GPUs x price + the WAN line)."""

from __future__ import annotations

from services.profiles import load_gpu
from services.scenario.model import Scenario


def cost_per_hour(scenario: Scenario) -> float:
    """GPUs x price per GPU-hour over every pool (a pool's own price wins over its GPU profile's), plus the WAN."""
    total = scenario.wan_price_per_hour if any(p.dc != scenario.pools[0].dc for p in scenario.pools) else 0.0
    for pool in scenario.pools:
        price = load_gpu(pool.gpu, price_per_hour=pool.price_per_hour).price_per_hour
        total += pool.count * pool.tp * price
    return total


def gpu_count(scenario: Scenario) -> int:
    return sum(pool.count * pool.tp for pool in scenario.pools)
