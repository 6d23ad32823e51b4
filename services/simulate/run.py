"""`simulate_run`: one bench run against the whole mesh in this process, on virtual time.

The workload, its arrivals and its pacing come from loadgen exactly as
`pdd-emu bench` draws them from the same seed (loadgen/bench/runner.py); the
requests go to the in-process mesh (services/simulate/wiring.py) through the
router's own checks and encoder (services/simulate/client.py). Every
`stats_every_s` of emulated time each service's /stats dict is kept.
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator, Mapping

from tqdm import tqdm

from loadgen.arrivals import arrival_offsets
from loadgen.bench.dispatch import Dispatcher, RunClock, Sender
from loadgen.bench.drive import drive_closed_loop, drive_open_loop, drive_trace_timing
from loadgen.bench.records import RequestRecord
from loadgen.bench.runner import BenchError, resolve_pacing
from loadgen.bench.config import BenchConfig
from loadgen.plan import RequestPlan
from loadgen.summary import summarize
from loadgen.tokens import DEFAULT_VOCAB
from loadgen.workloads import build_workload
from services.scenario import Scenario
from services.simulate.client import complete
from services.simulate.clock import VirtualClock, VirtualEventLoop, process_clocks, virtual_runner
from services.simulate.window_stop import WindowStop
from services.simulate.wiring import SimulatedMesh, simulated_plan

Snapshot = tuple[float, dict[str, dict]]
During = Callable[[Any], Awaitable[None]]  # given the running mesh


@dataclass
class SimulatedRun:
    records: list[RequestRecord]
    summary: dict[str, Any]
    snapshots: list[Snapshot] = field(default_factory=list)
    outputs: dict[str, list[int]] = field(default_factory=dict)  # each request's output token ids, by id
    plans: dict[str, RequestPlan] = field(default_factory=dict)  # each sent request's plan, by id (keep_plans)
    pace: list[tuple[float, float]] = field(default_factory=list)  # (emulated s, process CPU s) at each snapshot


class _LoopClock(RunClock):
    """RunClock on the running loop's time (virtual in a simulation) instead of perf_counter."""

    def __init__(self, duration_s: float, stop_sending: asyncio.Event) -> None:
        super().__init__(duration_s, stop_sending)
        self._loop = asyncio.get_running_loop()
        self.start = self._loop.time()

    def now(self) -> float:
        return self._loop.time() - self.start


class _Records:
    """The dispatcher's recorder, in memory."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)


@dataclass
class Driven:
    records: list[RequestRecord]
    outputs: dict[str, list[int]]
    rate: float | None
    concurrency: int | None
    skipped_arrivals: int
    plans: dict[str, RequestPlan] = field(default_factory=dict)  # each sent request's plan, by id (keep_plans)


async def drive(config: BenchConfig, send: Sender, ramp_s: float = 0.0,
                stop: WindowStop | None = None, keep_plans: bool = False,
                send_at: Mapping[str, float] | None = None) -> Driven:
    """The bench's workload, arrivals and pacing from `config.seed` (loadgen/bench/runner.py's draws, in
    its order), each request sent through `send`; on the running loop's clock. `ramp_s`: a closed loop's
    users join over that time (loadgen/bench/drive.py). `stop`: when sending stops, for a measured window
    (window_stop.py); it counts as the run goes. `keep_plans` keeps every sent request's plan, its prompt
    too (a fault campaign checks texts against them); without it a report-scale run would hold every
    64K-token prompt to its end. `send_at`: a closed loop's sends paced by another run's (drive.py)."""
    seeds = random.Random(config.seed)
    spec = config.workload_config
    plans = build_workload(spec, random.Random(seeds.getrandbits(64)))
    rate, concurrency = resolve_pacing(config, plans)
    outputs: dict[str, list[int]] = {}
    sent: dict[str, RequestPlan] = {}

    async def send_and_keep(plan: RequestPlan, send_s: float) -> tuple[RequestRecord, list[int]]:
        if keep_plans:
            sent[plan.request_id] = plan
        if stop is not None and not stop.sending(send_s):
            stop_sending.set()
        record, ids = await send(plan, send_s)
        outputs[plan.request_id] = ids
        if stop is not None and not stop.answered(record, clock.now()):
            stop_sending.set()
        return record, ids

    loop = asyncio.get_running_loop()
    recorder = _Records()
    stop_sending = asyncio.Event()
    clock = _LoopClock(config.duration_s, stop_sending)
    dispatcher = Dispatcher(send_and_keep, recorder, clock, config.max_requests, stop_sending)  # type: ignore[arg-type]
    timer = loop.call_later(config.duration_s, stop_sending.set)
    try:
        if concurrency is not None:
            await drive_closed_loop(plans, dispatcher, clock, concurrency, ramp_s, send_at=send_at)
        elif rate is not None:
            arrivals = arrival_offsets(rate, random.Random(seeds.getrandbits(64)), plans.arrival_shape,
                                       plans.arrival_cv)
            await drive_open_loop(plans, dispatcher, clock, arrivals)
        else:
            await drive_trace_timing(plans, dispatcher, clock)
        await dispatcher.drain()
    finally:
        timer.cancel()
    return Driven(recorder.records, outputs, rate, concurrency, dispatcher.skipped_arrivals, sent)


async def simulate_run(scenario: Scenario, workload: str, *, rate: float | None = None,
                       concurrency: int | None = None, duration_s: float, seed: int,
                       stats_every_s: float = 1.0, progress: bool = False,
                       request_timeout_s: float = 300.0, mesh_type: type[SimulatedMesh] = SimulatedMesh,
                       during: During | None = None, after: During | None = None,
                       sla: dict | None = None, ramp_s: float = 0.0,
                       stop: WindowStop | None = None, keep_plans: bool = False) -> SimulatedRun:
    """Run on the current loop (a VirtualEventLoop for virtual time: see `run_simulation`).

    `during(mesh)` runs beside the traffic from its start (a fault schedule, services/simulate/faults.py);
    `after(mesh)` once every request has its outcome and `during` has ended (a wait for the mesh at
    rest); the last snapshot is taken after both. `sla` ({"ttft_s", "tpot_s"}) is the SLA the
    summary's goodput counts against (default: the bench's). `stop`, `keep_plans`: as `drive`'s.
    """
    config = BenchConfig(url="http://simulated", workload=workload, out_dir=".", rate=rate, concurrency=concurrency,
                         duration_s=duration_s, seed=seed, request_timeout_s=request_timeout_s, progress=progress,
                         **({"sla": sla} if sla is not None else {}))
    vocab = getattr(config.workload_config, "vocab", DEFAULT_VOCAB)
    loop = asyncio.get_running_loop()
    wall_start = time.perf_counter()
    snapshots: list[Snapshot] = []
    pace: list[tuple[float, float]] = []
    bar = tqdm(total=round(duration_s, 1), unit="s", desc="simulate (emulated s)", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    async with mesh_type(simulated_plan(scenario)) as mesh:
        start = loop.time()
        beside = loop.create_task(during(mesh)) if during is not None else None

        def snapshot() -> None:
            snapshots.append((round(loop.time() - start, 9), mesh.stats()))
            pace.append((snapshots[-1][0], time.process_time()))  # the speed of a window, not of the whole run
            bar.update(round(min(duration_s, loop.time() - start) - bar.n, 1))
            ticker[0] = loop.call_later(stats_every_s, snapshot)

        ticker = [loop.call_later(stats_every_s, snapshot)]

        async def send(plan: RequestPlan, send_s: float):
            return await complete(mesh.router, plan, timeout_s=config.request_timeout_s, send_s=send_s, vocab=vocab)

        try:
            driven = await drive(config, send, ramp_s, stop, keep_plans)
            if beside is not None:
                await beside
            if after is not None:
                await after(mesh)
        finally:
            ticker[0].cancel()
            bar.close()
            if beside is not None:
                beside.cancel()
        emulated_s = loop.time() - start
        snapshots.append((round(emulated_s, 9), mesh.stats()))
    wall_s = time.perf_counter() - wall_start
    summary = summarize([r.row() for r in driven.records], sla=config.sla,
                        workload=config.workload_spec, offered_rate=driven.rate, concurrency=driven.concurrency,
                        skipped_arrivals=driven.skipped_arrivals)
    summary_dict = {**summary.model_dump(mode="json"), "emulated_s": round(emulated_s, 6), "wall_s": round(wall_s, 3),
                    "speedup": round(emulated_s / wall_s, 2) if wall_s > 0 else None}
    return SimulatedRun(driven.records, summary_dict, snapshots, driven.outputs, driven.plans, pace)


# Allocations of container objects between young-generation collections while a simulation runs, and
# young collections per middle one (CPython's defaults: 700 and 10). A report-scale run holds gigabytes
# of live token lists and block tables, which every collection of the older generations walks again:
# at the defaults the collector took 27% of a 1300-agent `paper-full-pdd` run (docs/simulate.md "Speed").
SIMULATION_GC_THRESHOLDS = (100_000, 50, 100)


@contextmanager
def batch_collector() -> Iterator[None]:
    """The cyclic collector tuned for one long batch run, restored after it. Which objects live and
    when they are freed is unchanged for everything not in a reference cycle, so records are the
    same; cycles (an exception's traceback, a task's frames) wait longer to be reclaimed.

    What the run left to the collector is collected as it ends, at a known point: left to the
    restored thresholds, that collection would come at some later allocation, in whatever runs
    next in the process (a mesh measured in real time, in the agreement test).

    The objects that lived before the run (modules, the scenario, an earlier run's results) are
    frozen for its length: no collection during the run walks them, nor the closing one, which
    then costs what the run left rather than what the process holds (docs/simulate.md "Speed").
    A process that froze objects itself keeps its freeze: unfreezing cannot tell theirs from ours.
    """
    saved = gc.get_threshold()
    ours = gc.get_freeze_count() == 0
    gc.set_threshold(*SIMULATION_GC_THRESHOLDS)
    if ours:
        gc.freeze()
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        gc.collect()
        if ours:
            gc.unfreeze()


def run_simulation(scenario: Scenario, workload: str, **options: Any) -> SimulatedRun:
    """`simulate_run` on a fresh virtual loop, with the process's clocks reading its time and the
    collector tuned for a batch run; `options` are simulate_run's keyword arguments."""
    with batch_collector(), virtual_runner() as runner:
        loop = runner.get_loop()
        assert isinstance(loop, VirtualEventLoop)
        result: list[SimulatedRun] = []

        async def main() -> None:
            # The result leaves through `result`, not as the task's own: asyncio.Runner's SIGINT
            # check repr()s the main task, and with it every record of the run (seconds at scale).
            result.append(await simulate_run(scenario, workload, **options))

        with process_clocks(VirtualClock(loop)):
            runner.run(main())
        return result[0]


def write_outputs(folder: Path, lines: list[str], summary: dict[str, Any]) -> None:
    """requests.jsonl (one record's JSON a line) and summary.json, as `pdd-emu bench` writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requests.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


__all__ = ["BenchError", "SimulatedRun", "run_simulation", "simulate_run", "write_outputs"]
