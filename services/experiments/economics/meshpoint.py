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
from services.experiments.economics.loadpoint import PointResult
from services.experiments.economics.window import Snapshot, point_of
from services.experiments.meshrun import MeshRun, get_json, records_of, run_deployment
from services.experiments.paper import expected_request_rate
from services.experiments.population import Step
from services.experiments.steady import Staircase, StepResult
from services.scenario.plan import MeshPlan
from services.scenario import Scenario
from services.types import Role

POLL_S = 1.0  # real seconds between /stats snapshots


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


def _point(run: MeshRun, step: StepResult, seed: int, window: list[Snapshot]) -> PointResult:
    return point_of(run.scenario, step, seed, window, records_of(step))
