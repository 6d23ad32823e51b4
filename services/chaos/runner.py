"""Run one chaos scenario end to end and judge it (docs/reliability.md).

1. Start the mesh; run the steady traffic alone for a warm-up window: the
   fault-free baseline (throughput, TTFT p50/p99, the healthy-TTFT bound).
2. Stop sending, let it drain, and take the mesh's footprint at rest.
3. Send again; apply each fault while the traffic flows; after each, wait
   until the traffic is healthy again (or the recovery deadline passes).
4. Stop sending, drain every request (each has a deadline), and check that
   every counter of work in progress is back at rest, with no fds or tasks
   gained.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import random
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import aiohttp

from services.chaos.client import SSE_LINE_LIMIT, Target
from services.chaos.faults import Window
from services.chaos.mesh import ChaosMesh
from services.chaos.outcomes import FaultFreeText, Outcome
from services.chaos.recovery import Baseline, recovered_at
from services.chaos.report import ChaosReport, count, error_groups, phase_reports
from services.chaos.resources import wait_at_rest, growth
from services.chaos.scenarios import DEADLINES, PRESETS, SCENARIOS, STEADY_RATE, STEADY_WORKLOAD, not_applicable
from services.chaos.traffic import Traffic
from services.http_limits import HttpLimits
from services.profiles import load_model

OUTCOMES_FILE = "outcomes.jsonl"
CLIENT_MARGIN_S = 15.0  # the client waits this much longer than the router's own request deadline
REST_WAIT_S = 30.0


class ChaosError(RuntimeError):
    """The run could not be carried out (not an invariant violation: those go in the report)."""


@dataclass(frozen=True)
class Timings:
    warmup_s: float  # fault-free traffic; the baseline is measured on it
    baseline_from_s: float  # requests sent before this are the warm-up's own first turns
    lead_s: float  # traffic flows this long before the first fault
    confirm_s: float  # a recovery counts once the traffic has been healthy this long
    recover_deadline_s: float


QUICK = Timings(warmup_s=15, baseline_from_s=2, lead_s=3, confirm_s=8, recover_deadline_s=60)
FULL = Timings(warmup_s=30, baseline_from_s=3, lead_s=5, confirm_s=20, recover_deadline_s=180)


@dataclass
class RunContext:
    """What a fault may use: the mesh, an HTTP session, the request target and the run's traffic."""

    mesh: ChaosMesh
    http: aiohttp.ClientSession
    target: Target
    seed: int
    traffics: list[Traffic] = field(default_factory=list)
    extra: list[Outcome] = field(default_factory=list)  # requests sent by the faults themselves

    def now(self) -> float:
        return self.target.now()


async def run_scenario(name: str, mode: str, quick: bool = False, run_dir: Path | None = None,
                       seed: int = 0) -> ChaosReport:
    if name not in SCENARIOS:
        raise ChaosError(f"unknown chaos scenario {name!r}; choose one of {', '.join(SCENARIOS)}")
    if mode not in PRESETS:
        raise ChaosError(f"unknown mode {mode!r}; choose one of {', '.join(PRESETS)}")
    if (reason := not_applicable(name, mode)) is not None:
        raise ChaosError(reason)
    scenario = SCENARIOS[name]
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix=f"pdd-emu-chaos-{name}-{mode}-"))
    mesh = ChaosMesh(PRESETS[mode], [*DEADLINES, *scenario.overrides], run_dir)
    began = time.monotonic()
    await asyncio.to_thread(mesh.start)
    try:
        return await _run(mesh, name, mode, quick, seed, began)
    finally:
        await asyncio.to_thread(mesh.stop)


def _requests_session() -> aiohttp.ClientSession:
    # No connection cap: an open loop must never queue requests inside the client. Idle connections are
    # dropped well before the router's keep-alive closes them (HttpLimits.keepalive_s, 15 s, aiohttp's
    # client default too): a request written to a connection the server is closing at that moment never
    # reaches it, and the client sees "Server disconnected" for a request the mesh never saw (the full
    # rld-overload run lost 7 that way). Clients must time idle connections out first.
    idle_s = HttpLimits().keepalive_s / 2
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=idle_s),
                                 read_bufsize=SSE_LINE_LIMIT)


async def _send_for(traffic: Traffic, seconds: float) -> None:
    stop = asyncio.Event()
    sender = asyncio.create_task(traffic.run(stop))
    await asyncio.sleep(seconds)  # the length of a measurement window
    stop.set()
    await sender


async def _run(mesh: ChaosMesh, name: str, mode: str, quick: bool, seed: int, began: float) -> ChaosReport:
    scenario, timings = SCENARIOS[name], QUICK if quick else FULL
    # Requests and operations use separate sessions: the requests' keep-alive connections are closed
    # before each at-rest footprint, so the router's sockets and tasks count only its own.
    async with aiohttp.ClientSession() as ops:
        vocab = load_model(mesh.scenario.model).vocab_size
        async with _requests_session() as http:
            target = Target(http, mesh.router_url, mesh.scenario.model, FaultFreeText(mesh.scenario.seed, vocab),
                            time.perf_counter(), mesh.scenario.request_timeout_s + CLIENT_MARGIN_S)
            steady = Traffic(target, STEADY_WORKLOAD, STEADY_RATE, "steady", seed)
            await _send_for(steady, timings.warmup_s)
            await steady.drain()
        baseline = Baseline.of(steady.outcomes, timings.baseline_from_s, timings.warmup_s)
        if baseline is None:
            raise ChaosError(f"no request completed during the fault-free warm-up; see the logs in {mesh.run_dir}")
        reasons, before = await wait_at_rest(mesh, ops, REST_WAIT_S)
        if reasons:
            raise ChaosError(f"the mesh is not at rest after the fault-free warm-up: {'; '.join(reasons)}")

        async with _requests_session() as http:
            steady.target = target = dataclasses.replace(target, http=http)
            run = RunContext(mesh, ops, target, seed, [steady])
            stop = asyncio.Event()
            sender = asyncio.create_task(steady.run(stop))
            await asyncio.sleep(timings.lead_s)  # traffic is flowing when the first fault strikes
            windows: list[Window] = []
            for phase in scenario.phases(quick, mode, random.Random(seed)):
                window = await phase.apply(run)
                windows.append(window)
                await _until_recovered(run, steady, window, baseline, timings)
            stop.set()
            await sender
            observed_until = run.now()
            for traffic in run.traffics:
                await traffic.drain()
        reasons, after = await wait_at_rest(mesh, ops, REST_WAIT_S)

    everything = [o for t in run.traffics for o in t.outcomes] + run.extra
    _write_outcomes(mesh.run_dir / OUTCOMES_FILE, everything)
    phases = phase_reports(windows, steady.outcomes, everything, baseline, observed_until)
    leaks = reasons + growth(before, after)
    by_pipeline = _degradations(everything, windows)
    violations = _violations(everything, phases, leaks)
    if scenario.check is not None:
        violations += scenario.check(windows, by_pipeline)
    if scenario.phase_check is not None:
        violations += scenario.phase_check(phases, mesh.scenario.sla.ttft_s)
    by_tag = collections.defaultdict(list)
    for outcome in everything:
        by_tag[outcome.tag].append(outcome)
    return ChaosReport(
        scenario=name, mode=mode, quick=quick, mesh=mesh.scenario.name, counts=count(everything),
        by_tag={tag: count(items) for tag, items in by_tag.items()}, errors=error_groups(everything),
        during_faults=by_pipeline,
        baseline={**asdict(baseline), "ttft_bound_s": baseline.ttft_bound_s}, phases=phases, leaks=leaks,
        rss_kib={n: {"start": before.rss_kib.get(n), "end": after.rss_kib.get(n)} for n in after.rss_kib},
        violations=violations, duration_s=round(time.monotonic() - began, 1))


async def _until_recovered(run: RunContext, steady: Traffic, window: Window, baseline: Baseline,
                           timings: Timings) -> None:
    """Poll the steady traffic's outcomes until it is healthy again; give up at the recovery deadline."""
    deadline = window.end_s + timings.recover_deadline_s
    while run.now() < deadline:
        if recovered_at(steady.outcomes, window.end_s, float("inf"), baseline.ttft_bound_s, run.now(),
                        timings.confirm_s) is not None:
            return
        await asyncio.sleep(0.5)  # the polling period of the recovery check


def _write_outcomes(path: Path, outcomes: list[Outcome]) -> None:
    """One JSON line per request, next to the mesh's logs: what to read when a number looks wrong."""
    with open(path, "w", encoding="utf-8") as lines:
        for o in sorted(outcomes, key=lambda o: o.send_s):
            record = {k: v for k, v in asdict(o).items() if k != "output_ids"}
            record["end_s"] = None if not o.done else round(o.end_s, 4)
            lines.write(json.dumps(record) + "\n")


def _degradations(outcomes: list[Outcome], windows: list[Window]) -> dict[str, int]:
    """How requests sent during the faults were served or refused: a degraded mode, else the policy
    reason; and 429s."""
    seen = collections.Counter()
    for o in outcomes:
        if any(w.start_s <= o.send_s < w.end_s for w in windows):
            served = f"degraded: {o.degraded}" if o.degraded else (o.reason or o.pipeline or o.kind)
            seen["429" if o.http_status == 429 else served] += 1
    return dict(seen)


def _violations(outcomes: list[Outcome], phases, leaks: list[str]) -> list[str]:
    problems = []
    for kind in ("lost", "corrupted"):
        bad = [o for o in outcomes if o.kind == kind]
        if bad:
            problems.append(f"{len(bad)} request(s) {kind}; first: {bad[0].request_id}: {bad[0].message}")
    problems += [f"{p.name}: the traffic was not back to its fault-free baseline when observation ended"
                 for p in phases if p.recovery_s is None]
    problems += [f"leak: {leak}" for leak in leaks]
    return problems
