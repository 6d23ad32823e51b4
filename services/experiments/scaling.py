"""How the report's setup maps onto a deployment this machine can run (docs/experiments.md §Scaling).

The WAN is sized by utilisation, the quantity the report's setup fixes:

    utilisation = rate x missed tokens per request x KV bytes per token x 8 / line rate

The report's setup, 80 req/s with 64K x (1 - 0.9) missed tokens of 4392 bytes
on 20 Gbit/s, gives 0.92. A run at a reference rate r whose requests miss m
tokens on average gets the line r x m x KV bytes x 8 / 0.92: the rate and the
line scale by the same factor, corrected for the workload's own missed tokens.
m is the workload's long-run mean, planned offline over whole sessions (first
turns included), so it does not depend on which turns a short window caught.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from loadgen.offline import plan_spec_offline
from services.experiments import reported
from services.profiles import load_model
from services.scenario import Scenario

# Assumed price of the 20 Gbit/s line: two 10 Gbit/s dedicated interconnect ports at $2.25 per
# port-hour (AWS Direct Connect list price), no per-GB charge as for a leased line. A scaled line
# costs proportionally less.
WAN_PRICE_PER_HOUR_20G = 4.50


def utilisation(rate_rps: float, missed_tokens: float, kv_bytes_per_token: int, line_bps: float) -> float:
    return rate_rps * missed_tokens * kv_bytes_per_token * 8 / line_bps


def report_utilisation(model: str = "pdd-paper") -> float:
    """The report's WAN utilisation: its rate, context, mean hit and line, with the model's KV bytes."""
    missed = reported.SETUP_CONTEXT_TOKENS * (1 - reported.SETUP_MEAN_HIT)
    return utilisation(reported.SETUP_RATE_RPS, missed, load_model(model).kv_bytes_per_token,
                       reported.SETUP_LINE_BPS)


def line_for(rate_rps: float, missed_tokens: float, model: str = "pdd-paper", target: float | None = None) -> float:
    """Line rate (bit/s) that `rate_rps` requests missing `missed_tokens` each load to the report's utilisation."""
    target = report_utilisation(model) if target is None else target
    return rate_rps * missed_tokens * load_model(model).kv_bytes_per_token * 8 / target


def workload_missed_tokens(spec: str, seed: int = 0, requests: int = 2000, sessions: int = 64) -> float:
    """Mean missed prompt tokens per request of an agentic workload, planned offline over whole sessions."""
    plans = plan_spec_offline(spec, seed, requests, sessions)
    return statistics.fmean(p.prompt_tokens * (1 - p.hit_rate) for p in plans)


def wan_price(line_bps: float) -> float:
    return WAN_PRICE_PER_HOUR_20G * line_bps / reported.SETUP_LINE_BPS


@dataclass(frozen=True)
class GpuCount:
    a: int  # the prefill-side GPU (H100 class)
    b: int  # the decode-side GPU (H200 class)


def gpu_count(scenario: Scenario, a_gpu: str = "h100-sxm") -> GpuCount:
    a = sum(p.count * p.tp for p in scenario.pools if p.gpu == a_gpu)
    return GpuCount(a, sum(p.count * p.tp for p in scenario.pools) - a)


def with_wan(scenario: Scenario, line_bps: float) -> Scenario:
    """The scenario with its WAN line set to `line_bps` and priced accordingly."""
    wan = scenario.wan.model_copy(update={"rate_bps": line_bps})
    return scenario.model_copy(update={"wan": wan, "wan_price_per_hour": wan_price(line_bps)})
