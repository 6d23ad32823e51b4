"""The real-time mesh as a load-point backend: one mesh per point, driven as the simulator drives its run.

A point starts the deployment's mesh and sends the workload through the bench's
own driver (services/simulate/run.py `drive`, as `simulate` sends it) on the
simulator backend's schedule: `load` agents join over the warm-up's first half,
and the window is the `measure_s` after the warm-up. Every service's /stats is
read once a second. The window becomes a point by the simulator backend's own
function (window.py `measured_point`), so the two backends differ only in how
the records and snapshots were made, and the quick run on both is their
cross-check (docs/results.md, "The quick run on both backends"). Each point also
keeps the mesh's event-loop lag (`mesh.json`): agreement is only asked of a
mesh whose loop kept up. `paced`: the point is simulated first and the mesh's
agents send each request at the simulation's send time, or when its previous
answer is in if later, so one answer's difference does not move every later
send (docs/simulate.md, "Agreement with the mesh").
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

from loadgen.bench.config import BenchConfig
from services.experiments.economics.loadpoint import PointResult
from services.experiments.economics.simpoint import paced, point_folder, simulated_run
from services.experiments.economics.window import Snapshot, measured_point
from services.experiments.meshrun import get_json, service_overheads
from services.experiments.population import Window
from services.launcher.plan import build_plan
from services.launcher.processes import start_mesh, stop_processes
from services.scenario import Scenario
from services.scenario.plan import MeshPlan
from services.simulate.agreement import bench_mesh
from services.types import Role

POLL_S = 1.0  # seconds between /stats snapshots, as the simulator keeps them


@dataclass
class MeshPoints:
    """Population loads on the real-time mesh, in real seconds (the mini presets need no dilation)."""

    out_dir: Path
    warmup_s: float = 30.0
    measure_s: float = 60.0
    paced: bool = False  # each point's sends at its simulation's send times
    backend: str = "mesh"

    def settings(self) -> dict[str, float | bool]:
        """The schedule every point ran (result.json `point_settings`)."""
        return {"warmup_s": self.warmup_s, "measure_s": self.measure_s, "paced": self.paced}

    async def send_times(self, scenario: Scenario, spec: str, pacing: dict, seed: int) -> dict[str, float] | None:
        """The simulated point's send offset of every request, when paced. Run before the mesh starts, in a
        thread as the simulator backend runs its points (a simulation runs its own virtual loop and swaps the
        process's clocks while it runs: services/simulate/run.py), with nothing of the mesh's yet waiting."""
        if not self.paced:
            return None
        run = await asyncio.to_thread(simulated_run, scenario, spec, pacing, seed, self.warmup_s, self.measure_s)
        return {r.id: r.send_s for r in run.records}

    async def run_point(self, scenario: Scenario, workload: str, load: float, seed: int) -> PointResult:
        spec, pacing, _ = paced(workload, load)
        point_dir = point_folder(self.out_dir, scenario, workload, load, seed)
        point_dir.mkdir(parents=True, exist_ok=True)
        send_at = await self.send_times(scenario, spec, pacing, seed)
        if send_at is not None:  # beside the mesh's records, for the cross-check; from the run's start, where
            # requests.jsonl counts from the window's (steady.py `window_records`)
            (point_dir / "simulated-sends.json").write_text(json.dumps(send_at))
        plan = build_plan(scenario)
        processes = await asyncio.to_thread(start_mesh, plan, point_dir / "mesh")
        snapshots: list[Snapshot] = []
        try:
            await asyncio.to_thread(service_overheads, plan, True)  # start-up is not part of the point
            url = f"http://{plan.router.host}:{plan.router.http_port}"
            config = BenchConfig(url=url, workload=spec, out_dir=point_dir, duration_s=self.warmup_s + self.measure_s,
                                 seed=seed, progress=False, **pacing)
            poller = asyncio.create_task(_poll(plan, snapshots, time.monotonic()))
            try:
                driven = await bench_mesh(url, config, ramp_s=self.warmup_s / 2, send_at=send_at)
            finally:
                poller.cancel()
                await asyncio.gather(poller, return_exceptions=True)
            lags, late = await asyncio.to_thread(service_overheads, plan)
        finally:
            await asyncio.to_thread(stop_processes, processes)
        (point_dir / "mesh.json").write_text(json.dumps({"loop_lag_p99_s": lags, "engine_late_max_s": late,
                                                         "paced": self.paced}))
        window = Window(pacing.get("concurrency"), self.warmup_s, self.warmup_s + self.measure_s)
        return measured_point(scenario, spec, seed, [r.row() for r in driven.records], snapshots, window, point_dir)


async def _poll(plan: MeshPlan, snapshots: list[Snapshot], started: float) -> None:
    while True:
        stats = await asyncio.to_thread(
            lambda: {s.name: get_json(f"http://{s.host}:{s.http_port}/stats") for s in plan.services
                     if s.role is not Role.ROUTER})
        snapshots.append((time.monotonic() - started, stats))
        await asyncio.sleep(POLL_S)
