"""The simulator as a load-point backend: one simulated run per (deployment, load, seed), in virtual time.

A load is a population of agents, as on the mesh (meshpoint.py): closed-loop
sessions that think between turns, here the simulator's `concurrency`; for a
trace (`mooncake:FILE`) it is the replay speed, the trace's own timestamps
pacing the requests. The run
warms for `warmup_s` emulated seconds (the cold start's first turns, which no
line or cache is sized for), then measures `measure_s`; the window keeps the
requests sent in it, and the validity inputs are the changes of the engines'
counters over the same window, read from the simulated services' /stats
snapshots with the mesh backend's own function (docs/results.md, "Economics:
method"). Each run is its own virtual loop in a worker thread, so the search's
event loop is never virtual. With `workers` above 1 the points run in that many
processes of a local Ray instead (services/simulate/sweep.py starts Ray the same
way), and `parallel` tells the method it may ask for several points at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.spec import parse_spec, spec_string
from loadgen.summary import SlaConfig
from loadgen.workloads import MooncakeConfig
from services.experiments.economics.loadpoint import PointResult
from services.experiments.economics.memo import point_key
from services.experiments.economics.window import measured_point
from services.experiments.goodput import THRESHOLD
from services.experiments.population import Window
from services.scenario import Scenario
from services.simulate.run import SimulatedRun, run_simulation
from services.simulate.sweep import import_ray, start_ray
from services.simulate.window_stop import WindowStop


def paced(workload: str, load: float, open_loop: bool = False) -> tuple[str, dict[str, Any], str]:
    """The run's workload spec, its pacing options and the point's folder name, for a load.

    A load is a population of agents (closed loop) for a generated workload, or with `open_loop`
    a request rate (the planner's, whose knee `pdd-emu simulate --rate` reproduces), and a replay
    speed for a trace (`mooncake:FILE`), whose own timestamps pace it (open loop).
    """
    config = parse_spec(workload)
    if isinstance(config, MooncakeConfig):
        return spec_string(config.model_copy(update={"speed": load})), {}, f"speed-{load:g}"
    if open_loop:
        return workload, {"rate": load}, f"rate-{load:g}"
    users = max(1, int(load))
    return workload, {"concurrency": users}, f"users-{users}"


def run_folder(scenario: Scenario, workload: str, seed: int) -> str:
    """A deployment's points' folder: its name, and a digest of all it runs (a sensitivity case's overrides and
    workload give the same preset a folder of its own), and the seed."""
    digest = hashlib.sha256(point_key(scenario, workload, 0.0, seed).encode()).hexdigest()[:8]
    return f"{scenario.name}-{digest}-seed{seed}"


def point_folder(out_dir: Path, scenario: Scenario, workload: str, load: float, seed: int, whole: bool = False,
                 open_loop: bool = False) -> Path:
    """Where a point's window is written: its deployment's run folder, then the load's (`-whole`: a window read
    whole, past its verdict)."""
    name = paced(workload, load, open_loop)[2] + ("-whole" if whole else "")
    return out_dir / run_folder(scenario, workload, seed) / name


def simulated_run(scenario: Scenario, spec: str, pacing: dict[str, Any], seed: int, warmup_s: float, measure_s: float,
                  stop: WindowStop | None = None) -> SimulatedRun:
    """A point's simulation, on either backend's schedule: `warmup_s` then `measure_s`, the agents joining over the
    warm-up's first half, as the mesh's staircase ramps them. All at once, a report-scale population sends its
    first turns (fresh, a quarter of the context each) in one burst that prefill takes minutes to clear, and
    the window would measure that."""
    return run_simulation(scenario, spec, duration_s=warmup_s + measure_s, seed=seed, ramp_s=warmup_s / 2,
                          stop=stop, **pacing)


def simulate_window_point(scenario: Scenario, workload: str, load: float, seed: int, warmup_s: float,
                          measure_s: float, out_dir: Path, window_requests: int | None = None,
                          stop_at_verdict: bool = True, open_loop: bool = False) -> PointResult:
    """One point: the run, its window's bench outputs under `out_dir`, and the point they make.

    The window is `measure_s` long, or ends as the request after its `window_requests`-th is sent,
    whichever comes first: at high load a window of that many requests is shorter, and the run
    stops sending there. A window of `window_requests` also ends as soon as enough of its requests
    have missed the SLA that it must fail, unless `stop_at_verdict` is False
    (services/simulate/window_stop.py): a point past the knee is then a few hundred requests long,
    its verdict the whole window's.
    """
    spec, pacing, _ = paced(workload, load, open_loop)
    sla = SlaConfig(ttft_s=scenario.sla.ttft_s, tpot_s=scenario.sla.tpot_s)
    stop = None if window_requests is None else WindowStop(warmup_s, window_requests,
                                                           sla if stop_at_verdict else None, THRESHOLD)
    run = simulated_run(scenario, spec, pacing, seed, warmup_s, measure_s, stop)
    records = [r if isinstance(r, dict) else r.row() for r in run.records]
    sends = sorted(r["send_s"] for r in records if r["send_s"] >= warmup_s)
    full = window_requests is not None and len(sends) > window_requests
    end = sends[window_requests] if full else warmup_s + measure_s
    window = Window(pacing.get("concurrency"), warmup_s, end if stop is None else stop.window_end(end))
    whole = not stop_at_verdict and window_requests is not None
    point = measured_point(scenario, spec, seed, records, run.snapshots, window,
                           point_folder(out_dir, scenario, workload, load, seed, whole, open_loop))
    return dataclasses.replace(point, load=pacing.get("concurrency", load),
                               stopped_at_verdict=stop is not None and stop.stopped_s is not None)


@dataclass
class SimulatedPoints:
    """Population (or trace replay speed) loads on the simulator; every duration is emulated seconds."""

    out_dir: Path
    warmup_s: float = 120.0  # several agent turns (think 10 s + a 64K turn), so sessions reach their later turns
    measure_s: float = 300.0  # 5 emulated minutes at most: at 10 req/s, 3000 requests for the P99
    window_requests: int | None = 3000  # the window ends with its 3000th request if that comes first
    workers: int = 1  # processes running points at once; 1: each point in a thread of this process, in turn
    ray_address: str | None = None  # a running Ray cluster's, whose CPUs run the points (workers is then unused)
    backend: str = "simulate"
    open_loop: bool = False  # a load is a request rate (paced), not a population of agents
    _ray: Any = field(default=None, repr=False)
    _task: Any = field(default=None, repr=False)

    def settings(self) -> dict[str, float | int | None]:
        """What a point depends on besides its scenario, workload, load and seed (memo.py's stored key)."""
        settings = {"warmup_s": self.warmup_s, "measure_s": self.measure_s, "window_requests": self.window_requests,
                    "stops_at_verdict": self.stops_at_verdict}
        return {**settings, "open_loop": True} if self.open_loop else settings

    @property
    def stops_at_verdict(self) -> bool:
        return self.window_requests is not None

    @property
    def parallel(self) -> bool:
        return self.workers > 1 or self.ray_address is not None

    async def run_point(self, scenario: Scenario, workload: str, load: float, seed: int, whole: bool = False
                        ) -> PointResult:
        """The point; `whole`: its window runs its whole budget even once it must fail."""
        args = (scenario, workload, load, seed, self.warmup_s, self.measure_s, self.out_dir, self.window_requests,
                not whole, self.open_loop)
        if not self.parallel:
            return await asyncio.to_thread(simulate_window_point, *args)
        if self._task is None:
            ray = import_ray()
            if start_ray(ray, self.ray_address, self.workers):
                self._ray = ray  # started or joined here: close() stops it or leaves the cluster
            self._task = ray.remote(simulate_window_point)
        return await self._task.remote(*args)

    def close(self) -> None:
        """Stop the local Ray this backend started (or leave the cluster it joined), if it did."""
        if self._ray is not None:
            self._ray.shutdown()
        self._ray = self._task = None
