"""Every assumed parameter of the economics experiment as named override sets, and the tornado they give.

A case changes the scenario (loader overrides, chosen per deployment: a pool is
named by its role) and/or the workload spec. Each parameter has a low and a
high case (the issue's alternative values, or the base +-50%); the tornado is
the headline figure at each against the base run, widest swing first.
Where each value comes from: docs/economics.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loadgen.hitbins import DEFAULT_HIT_WEIGHTS
from services.experiments.scaling import WAN_PRICE_PER_HOUR_20G
from services.profiles import load_gpu
from services.scenario import Scenario
from services.types import Role

H100_PRICE = load_gpu("h100-sxm").price_per_hour  # GPU-A, from the profile
BASE_THRESHOLD_S = 0.5  # PddSpec's default, the report's


def _b_pools(scenario: Scenario) -> list[str]:
    return [p.name for p in scenario.pools if p.dc != scenario.pools[0].dc]


def _b_price(premium: float) -> Callable[[Scenario], tuple[str, ...]]:
    return lambda s: tuple(f"pools.{name}.price_per_hour={H100_PRICE * (1 + premium):.4f}" for name in _b_pools(s))


def _if_wan(field: str, value: float) -> Callable[[Scenario], tuple[str, ...]]:
    return lambda s: (f"{field}={value}",) if s.wan_price_per_hour else ()


def _if_role(role: Role, override: str) -> Callable[[Scenario], tuple[str, ...]]:
    return lambda s: tuple(override.format(name=p.name) for p in s.pools_with(role))


def _hits(first_bin_factor: float) -> str:
    weights = (DEFAULT_HIT_WEIGHTS[0] * first_bin_factor, *DEFAULT_HIT_WEIGHTS[1:])
    return "hits=" + "/".join(f"{w:.3f}" for w in weights)


def _scaled_pool(role: Role, factor: int) -> Callable[[Scenario], tuple[str, ...]]:
    return lambda s: tuple(f"pools.{p.name}.count={p.count * factor}" for p in s.pools_with(role))


def _pdd_prefill(count: int) -> Callable[[Scenario], tuple[str, ...]]:
    """PDD's prefill pools at `count` instances; a deployment without a relay keeps its own."""
    return lambda s: tuple(f"pools.{p.name}.count={count}" for p in s.pools_with(Role.PREFILL)) \
        if s.pools_with(Role.RELAY_DECODE) else ()


def _none(scenario: Scenario) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Case:
    label: str  # the value, as the tornado shows it
    scenario_overrides: Callable[[Scenario], tuple[str, ...]] = _none
    workload_option: str | None = None  # key=value replacing the workload spec's own
    # where the case's search starts, as a multiple of the base knee: a case that scales the tier that
    # sets the knee by k moves it by about k, and a search from the base knee would step there 8% at a time
    start_scale: float = 1.0
    # a case whose mechanism is the line's (the bytes it carries, which requests relay past it): its run
    # also compares TTFTs, PDD against cross-DC PD at the case's reference load, as the base run does
    ttfts: bool = False

    def workload(self, spec: str) -> str:
        return spec if self.workload_option is None else with_option(spec, self.workload_option)


@dataclass(frozen=True)
class Parameter:
    name: str
    base: str  # the base value, as the table shows it
    low: Case
    high: Case | None  # None: only one alternative exists


PARAMETERS = (
    Parameter("KV bytes per token", "4.4 KB", Case("46 KB", lambda s: ("model=pdd-paper-kv46k",), ttfts=True),
              None),
    Parameter("GPU-B price premium", f"{load_gpu('h200-sxm').price_per_hour / H100_PRICE - 1:.0%}",
              Case("20%", _b_price(0.20)), Case("30%", _b_price(0.30))),
    Parameter("line price", f"${WAN_PRICE_PER_HOUR_20G:.2f}/h",
              Case("-50%", _if_wan("wan_price_per_hour", WAN_PRICE_PER_HOUR_20G / 2)),
              Case("+50%", _if_wan("wan_price_per_hour", WAN_PRICE_PER_HOUR_20G * 1.5))),
    # one TP16 H100 instance is the smallest that holds the model, so the relay can only grow
    Parameter("relay size", "1 instance", Case("2 instances", _if_role(Role.RELAY_DECODE, "pools.{name}.count=2")),
              None),
    # not assumed but sized (docs/simulate.md, "Deployments at the report's scale"): every base knee is
    # where this shared tier saturates, so its size is the gap's named cause (docs/results.md)
    Parameter("prefill tier", "2 instances",
              Case("4 instances", _scaled_pool(Role.PREFILL, 2), start_scale=2.0), None),
    # The same tier in every deployment is this emulator's sizing rule. The report's PDD has a relay of
    # "a handful" of its 43 GPU-A, so most of its A side prefills; here the relay is a whole instance
    # (the smallest that holds the model), and a third prefill instance is the nearest whole-instance
    # reading of an A side given to prefill: 64 GPU-A, against the report's 43.
    Parameter("PDD's prefill tier", "2 instances, the baseline's",
              Case("3 instances", _pdd_prefill(3), start_scale=1.5), None),
    # Linux's defaults, not a fit: a receive buffer of at most 6 MiB (tcp_rmem), half of it advertised
    # (tcp_adv_win_scale 1), so 3 MiB in flight a round trip; over the preset's 20 ms, 1.26 Gbit/s a
    # connection and 5 Gbit/s for the KV sender's pool of four; and -50% of that (docs/results.md,
    # "Economics: method")
    Parameter("WAN connection window", "none",
              Case("1.5 MiB", _if_wan("wan.window_bytes", 3 * 2**19), ttfts=True),
              Case("3 MiB", _if_wan("wan.window_bytes", 3 * 2**20), ttfts=True)),
    Parameter("host-tier size", "50% of DRAM", Case("25%", lambda s: ("engine.host_cache_fraction=0.25",)),
              Case("75%", lambda s: ("engine.host_cache_fraction=0.75",))),
    Parameter("hit mix (0-90% bin)", f"{DEFAULT_HIT_WEIGHTS[0]:.0%}", Case("-50%", workload_option=_hits(0.5)),
              Case("+50%", workload_option=_hits(1.5))),
    Parameter("output length", "32..480", Case("-50%", workload_option="output=16..240"),
              Case("+50%", workload_option="output=48..720")),
    Parameter("pipeline threshold", f"{BASE_THRESHOLD_S * 1000:.0f} ms",
              Case("-50%", _if_role(Role.RELAY_DECODE, f"pdd.transfer_threshold_s={BASE_THRESHOLD_S / 2}"),
                   ttfts=True),
              Case("+50%", _if_role(Role.RELAY_DECODE, f"pdd.transfer_threshold_s={BASE_THRESHOLD_S * 1.5}"),
                   ttfts=True)),
)


def with_option(spec: str, option: str) -> str:
    """`kind:a=1,b=2` with `option` (key=value) set, replacing the spec's own value of that key."""
    kind, _, rest = spec.partition(":")
    key = option.partition("=")[0]
    kept = [part for part in rest.split(",") if part and part.partition("=")[0] != key]
    return f"{kind}:{','.join([*kept, option])}"


@dataclass(frozen=True)
class Bar:
    parameter: str
    low_label: str
    high_label: str | None
    low: float
    high: float | None

    def swing(self, base: float) -> float:
        return max(abs(self.low - base), abs(self.high - base) if self.high is not None else 0.0)


def tornado(base: float, results: dict[str, tuple[float, float | None]]) -> list[Bar]:
    """Bars of a headline figure per parameter (its value at the low and high case), widest swing first."""
    bars = []
    for parameter in PARAMETERS:
        if parameter.name not in results:
            continue
        low, high = results[parameter.name]
        bars.append(Bar(parameter.name, parameter.low.label, parameter.high.label if parameter.high else None,
                        low, high))
    return sorted(bars, key=lambda bar: bar.swing(base), reverse=True)
