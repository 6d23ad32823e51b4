"""The chaos catalogue: which mesh, which traffic, which faults, and what each must show.

Every scenario runs pdd-mini (--mode pdd) or pd-cross-mini (--mode pd-cross)
under the same steady agentic traffic, with the request deadlines of DEADLINES
so that no outcome may take longer than the client's deadline. Quick runs keep
the short faults only (docs/reliability.md lists both).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from services.chaos.faults import KillRestart, WanJitter, WanPartition, Window
from services.chaos.hangs import Hang, hang_targets, hangs_check
from services.chaos.pressure import RelayOverload, SlowConsumers
from services.chaos.rotation import rss_bounded, slots
from services.types import Role

PRESETS = {"pdd": "pdd-mini", "pd-cross": "pd-cross-mini"}
DEADLINES = ("request_timeout_s=90s", "transfer_timeout_s=45s")
STEADY_WORKLOAD = "agentic:context=16K,output=32..256,think=500ms,turns=6"
STEADY_RATE = 2.0  # requests per second: light enough for two cores with room for the faults
RELAY_LOAD_BOUND = 1.25  # (running + waiting) / capacity the relay may reach while overloaded

Phases = Callable[[bool, str, random.Random], list]


@dataclass(frozen=True)
class ChaosScenario:
    name: str
    summary: str
    phases: Phases
    modes: tuple[str, ...] = ("pdd", "pd-cross")
    overrides: tuple[str, ...] = ()
    check: Callable[[list[Window], dict], list[str]] | None = None
    in_ci: bool = True  # the long soak is run by hand (`make soak-faults`), not by `make test-chaos`
    ci_modes: tuple[str, ...] | None = None  # the modes `make test-chaos` runs (None: every mode of `modes`)
    # judged on the phases' reports and the mesh's TTFT SLA, seconds
    phase_check: Callable[[list, float], list[str]] | None = None


def _decode_role(mode: str) -> Role:
    return Role.MAIN_DECODE if mode == "pdd" else Role.DECODE


def _jitter(quick: bool, mode: str, rng: random.Random) -> list:
    delays = (1, 8, 20, 5, 14, 2) if quick else tuple(round(rng.uniform(1, 20), 1) for _ in range(15))
    return [WanJitter(delays, hold_s=4, rate_drop_s=10)]


def _partitions(quick: bool, mode: str, rng: random.Random) -> list:
    short = [WanPartition("blackhole", 5), WanPartition("reject", 5)]
    return short if quick else short + [WanPartition("blackhole", 60), WanPartition("reject", 60)]


def _kill(role_of: Callable[[str], Role]) -> Phases:
    return lambda quick, mode, rng: [KillRestart(role_of(mode))]


def _overload_check(windows: list[Window], by_pipeline: dict) -> list[str]:
    problems = []
    for window in windows:
        load = window.notes["relay_peak_load"]
        if load > RELAY_LOAD_BOUND:
            problems.append(f"relay queue not bounded: (running + waiting) reached {load:.2f} x its capacity "
                            f"(bound {RELAY_LOAD_BOUND})")
    if not by_pipeline.get("relay saturated") and not by_pipeline.get("429"):
        problems.append("the overload neither went P-MD (relay saturated) nor got 429: the relay took it all")
    return problems


SCENARIOS: dict[str, ChaosScenario] = {s.name: s for s in (
    ChaosScenario("wan-jitter", "WAN KV transfer time wandering 1-20 s, then the line at a tenth for 10 s",
                  _jitter),
    ChaosScenario("wan-partition", "WAN partitioned, blackhole then reject: 5 s each (and 60 s each, full)",
                  _partitions),
    ChaosScenario("kill-md", "kill -9 of the main-decode (pd-cross: decode) process mid-stream, then restart",
                  _kill(_decode_role)),
    ChaosScenario("kill-rld", "kill -9 of the relay-decode process mid-stream, then restart",
                  _kill(lambda mode: Role.RELAY_DECODE), modes=("pdd",)),
    ChaosScenario("kill-prefill", "kill -9 of the prefill process mid-stream, then restart",
                  _kill(lambda mode: Role.PREFILL)),
    ChaosScenario(
        "rld-overload", "low-hit traffic offered far above the relay tier's capacity", modes=("pdd",),
        phases=lambda quick, mode, rng: [RelayOverload("poisson:input=2K,output=64..96", rate=8,
                                                       duration_s=15 if quick else 60, burst=6)],
        # A small relay (8 sequences on one L40S) behind a 2 s WAN: every fresh request wants the relay. The
        # WAN's queue holds rate x (delay + 1 s), so the line is not what saturates (docs/netem.md: the
        # queue bound counts propagating bytes).
        overrides=("engine.max_running=8", "pools.main-decode.count=8", "pools.relay-decode.gpu=l40s",
                   "wan.delay_s=2s", "wan.rate_bps=100gbit", "wan.queue_bytes=40GiB"),
        check=_overload_check),
    ChaosScenario("slow-consumer", "clients that read their stream slowly, or hang up in the middle of it",
                  lambda quick, mode, rng: [SlowConsumers(duration_s=10 if quick else 30, every_s=1.0)]),
    ChaosScenario(
        "hang", "SIGSTOP of every role's process and of each KV link in turn, held until the keeper kills it",
        lambda quick, mode, rng: [Hang(target) for target in hang_targets(mode)],
        # pdd has every role and both kinds of link; pd-cross's hangs (prefill, decode, the WAN link) are run by hand
        ci_modes=("pdd",), phase_check=hangs_check),
    ChaosScenario("fault-soak", "a different fault every minute, 30 minutes (3 quick), RSS bounded",
                  slots, check=rss_bounded, in_ci=False),
)}


def not_applicable(name: str, mode: str) -> str | None:
    """Why `name` cannot run in `mode`, or None when it can."""
    scenario = SCENARIOS[name]
    if mode in scenario.modes:
        return None
    return (f"chaos scenario {name} applies to mode {', '.join(scenario.modes)} only: "
            f"{mode} has no relay-decode tier (its requests go prefill -> decode)")
