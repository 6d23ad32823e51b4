"""Run one deployment: start its mesh, climb a staircase of agent populations, read the services' own numbers.

Besides the client's summary, a run keeps what only the services know: every
process's event-loop lag (how late a 10 ms timer fired) and the engines' worst
step lateness, the emulator's own overhead, so a result can say whether the
emulator distorted it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from loadgen.summary import SlaConfig
from netem.client import ControlClient
from services.credentials import link_token
from services.launcher.plan import build_plan
from services.scenario.link_config import real_fields
from services.scenario.plan import MeshPlan
from services.launcher.processes import start_mesh, stop_processes
from services.scenario import Scenario
from services.scenario.cost import cost_per_hour
from services.experiments.dilation import dilate_scenario
from services.experiments.steady import Staircase, StepResult, run_staircase

STATS_TIMEOUT_S = 10.0
WARMUP_WAN_FACTOR = 10.0  # the cold start's burst of first turns is not what the line is sized for


@dataclass
class MeshRun:
    """One deployment up one staircase, in emulated time: a summary per window and the services' view."""

    scenario: Scenario  # undilated
    stairs: Staircase
    steps: list[StepResult]
    loop_lag_p99_s: dict[str, float] = field(default_factory=dict)  # real seconds, per service
    engine_late_max_s: float = 0.0  # real seconds: worst step wake-up after its deadline
    wall_s: float = 0.0

    @property
    def cost_per_hour(self) -> float:
        return cost_per_hour(self.scenario)

    @property
    def worst_loop_lag_s(self) -> float:
        """p99 event-loop lag of the busiest service, in emulated time (real lag / dilation)."""
        return max(self.loop_lag_p99_s.values(), default=0.0) / self.stairs.dilation

    def step_at(self, users: int) -> StepResult | None:
        return next((s for s in self.steps if s.window.users == users), None)

    def wan_utilisation(self, step: StepResult) -> float:
        return step.wan_utilisation(self.scenario.wan.rate_bps)


def records_of(step: StepResult) -> list[dict]:
    lines = (step.window_dir / "requests.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=STATS_TIMEOUT_S) as reply:
        return json.loads(reply.read())


def service_overheads(plan: MeshPlan, reset: bool = False) -> tuple[dict[str, float], float]:
    """Every service's p99 event-loop lag and the worst engine step lateness, in real seconds."""
    query = "?reset_lag=1" if reset else ""
    lags, late = {}, 0.0
    for service in plan.services:
        stats = get_json(f"http://{service.host}:{service.http_port}/stats{query}")
        lags[service.name] = stats["loop_lag_s"]["p99"]
        for instance in stats.get("instances", {}).values():
            late = max(late, instance["late_seconds_max"])
    return lags, late


async def set_wan_rate(plan: MeshPlan, factor: float, token: str | None) -> None:
    """Run every WAN link at `factor` x its planned rate (netem's control API; docs/experiments.md §Steady state).

    token: the links' control token (the mesh's RUN_DIR/link-token)."""
    async with aiohttp.ClientSession() as http:
        for link in plan.links:
            if link.kind == "wan" and link.purpose == "kv":  # the KV line; gRPC keeps its planned rate
                patch = real_fields(link, {"rate": link.spec.rate_bps * factor}, plan.scenario.byte_scale)
                await ControlClient(http, f"http://{link.host}:{link.control_port}", token, STATS_TIMEOUT_S
                                    ).patch_config({"both": patch})


async def run_deployment(scenario: Scenario, workload: str, stairs: Staircase, out_dir: Path,
                         observe: Callable[[MeshPlan], Awaitable[None]] | None = None) -> MeshRun:
    """Start `scenario`'s mesh (dilated by the staircase's factor), climb it, read the services, stop the mesh.

    `observe(plan)`, when given, runs beside the climb (from its start) and is cancelled when it ends.

    The cold start crosses a WAN running WARMUP_WAN_FACTOR times faster than planned; the line drops
    to its rate when the first ramp ends, so the windows see a warm deployment on the planned line.
    """
    shutil.rmtree(out_dir, ignore_errors=True)
    plan = build_plan(dilate_scenario(scenario, stairs.dilation))
    started = time.monotonic()
    processes = await asyncio.to_thread(start_mesh, plan, out_dir / "mesh")
    token = link_token(run_dir=out_dir / "mesh")
    try:
        await asyncio.to_thread(service_overheads, plan, True)  # start-up is not part of the run
        await set_wan_rate(plan, WARMUP_WAN_FACTOR, token)
        url = f"http://{plan.router.host}:{plan.router.http_port}"
        watcher = asyncio.create_task(observe(plan)) if observe is not None else None
        try:
            steps = await run_staircase(url, scenario.model, workload, stairs, out_dir / "bench",
                                        SlaConfig(ttft_s=scenario.sla.ttft_s, tpot_s=scenario.sla.tpot_s),
                                        label=scenario.name, cost_per_hour=cost_per_hour(scenario),
                                        after_ramp=lambda: set_wan_rate(plan, 1.0, token))
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
        lags, late = await asyncio.to_thread(service_overheads, plan)
    finally:
        await asyncio.to_thread(stop_processes, processes)
    return MeshRun(scenario, stairs, steps, lags, late, time.monotonic() - started)
