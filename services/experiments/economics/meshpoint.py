"""The real-time mesh as a load-point backend: each deployment's mesh climbs a short staircase of agents.

A load is a population of agents (closed loop, services/experiments/steady.py).
Besides the client's records the backend polls every service's /stats once per
real second; the validity inputs are the changes of the engines' counters over
the measured window (docs/results.md, "Economics: method"). `run_grid` runs
several loads in one mesh, one window each, as the paper experiment does;
`run_point` is the one-load case of the interface.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from loadgen.spec import parse_spec
from services.experiments.dilation import dilation_for
from services.experiments.economics.loadpoint import PointResult, PointStats, Quantiles
from services.experiments.meshrun import MeshRun, get_json, records_of, run_deployment
from services.experiments.paper import expected_request_rate
from services.experiments.population import Step
from services.experiments.steady import Staircase, StepResult
from services.scenario.plan import MeshPlan
from services.scenario import Scenario
from services.types import Role

POLL_S = 1.0  # real seconds between /stats snapshots
Snapshot = tuple[float, dict[str, dict]]  # (real seconds since the climb began, stats per service)


@dataclass
class MeshPoints:
    """Population loads on the real-time mesh; durations are emulated seconds."""

    out_dir: Path
    first_ramp_s: float = 10.0
    step_ramp_s: float = 0.0
    settle_s: float = 5.0
    measure_s: float = 15.0
    real_tokens_per_s: float = 2000.0  # the emulator's comfortable output-token rate (experiments/paper.py)
    backend: str = "mesh"

    async def run_point(self, scenario: Scenario, workload: str, load: float, seed: int) -> PointResult:
        return (await self.run_grid(scenario, workload, (load,), seed))[0]

    async def run_grid(self, scenario: Scenario, workload: str, loads: tuple[float, ...], seed: int
                       ) -> list[PointResult]:
        """One mesh up the given populations; the climb stops early once a window clearly misses the SLA."""
        users = sorted({int(load) for load in loads})
        steps = tuple(Step(n, self.first_ramp_s if i == 0 else self.step_ramp_s, self.settle_s, self.measure_s)
                      for i, n in enumerate(users))
        spec = parse_spec(workload)
        rate = expected_request_rate(scenario, users[-1], spec.think, spec.output.mean)
        stairs = Staircase(steps, seed=seed, dilation=dilation_for(rate, spec.output.mean, self.real_tokens_per_s))
        snapshots: list[Snapshot] = []
        run = await run_deployment(scenario, workload, stairs, self.out_dir / f"{scenario.name}-seed{seed}",
                                   observe=lambda plan: _poll(plan, snapshots))
        return [_point(run, step, seed, _window(snapshots, step, stairs.dilation)) for step in run.steps]


async def _poll(plan: MeshPlan, snapshots: list[Snapshot]) -> None:
    started = time.monotonic()
    while True:
        stats = await asyncio.to_thread(
            lambda: {s.name: get_json(f"http://{s.host}:{s.http_port}/stats") for s in plan.services
                     if s.role is not Role.ROUTER})
        snapshots.append((time.monotonic() - started, stats))
        await asyncio.sleep(POLL_S)


def _window(snapshots: list[Snapshot], step: StepResult, dilation: float) -> list[Snapshot]:
    start, end = step.window.start_s * dilation, step.window.end_s * dilation
    return [s for s in snapshots if start <= s[0] <= end]


def _engines(snapshot: dict[str, dict], *roles: Role) -> list[dict]:
    values = {r.value for r in roles}
    return [e for stats in snapshot.values() if stats.get("role") in values for e in stats["instances"].values()]


def _delta(first: dict, last: dict, roles: tuple[Role, ...], key: str) -> float:
    return sum(e[key] for e in _engines(last, *roles)) - sum(e[key] for e in _engines(first, *roles))


def window_stats(window: list[Snapshot], scenario: Scenario) -> dict:
    """Engine-side validity inputs over a window of snapshots; {} with fewer than two."""
    if len(window) < 2:
        return {}
    (t0, first), (t1, last) = window[0], window[-1]
    prefill, decode, relay = (Role.PREFILL,), (Role.DECODE, Role.MAIN_DECODE), (Role.RELAY_DECODE,)
    instances = len(_engines(last, *prefill))
    queried = _delta(first, last, prefill, "prefix_cache_query_tokens")
    hit = sum(_delta(first, last, prefill, key) for key in ("prefix_cache_hit_tokens", "host_cache_hit_tokens"))
    steps = _delta(first, last, decode, "steps")
    usage = [sum(e["kv_blocks_used"] for e in _engines(s, *decode)) / max(1, sum(e["kv_blocks_total"] for e in
             _engines(s, *decode))) for _, s in window]
    has_relay = bool(scenario.pools_with(Role.RELAY_DECODE))
    return {
        "prefill_busy": _delta(first, last, prefill, "busy_seconds") / ((t1 - t0) * instances) if instances else None,
        "prefill_hit": hit / queried if queried else None,
        "md_batch_mean": _delta(first, last, decode, "decode_tokens") / steps if steps else None,
        "md_kv_usage": max(usage),
        "rld_queue_max": max(sum(e["waiting"] for e in _engines(s, *relay)) for _, s in window) if has_relay
        else None,
    }


def _q(p) -> Quantiles:
    return Quantiles(p.p50, p.p90, p.p99)


def _point(run: MeshRun, step: StepResult, seed: int, window: list[Snapshot]) -> PointResult:
    s = step.summary
    crosses = any(p.dc != run.scenario.pools[0].dc for p in run.scenario.pools)
    stats = PointStats(planned_hit=s.hit_rate_mean, wan_utilisation=run.wan_utilisation(step) if crosses else None,
                       rld_token_share=s.rld_token_share, pipelines=dict(s.pipelines),
                       **window_stats(window, run.scenario))
    ttfts = tuple(r["ttft_s"] for r in records_of(step) if r.get("ttft_s") is not None)
    return PointResult(step.window.users, seed, s.sent, s.sla_attainment, step.goodput_rps, step.request_rate,
                       _q(s.ttft_s), _q(s.tpot_s), _q(s.e2e_s), stats, ttfts)
