"""Benchmark runs that measure steady states: a staircase of offered rates, each with a measured window.

An agentic session's first turn is always a cache miss, and an open loop opens
as many sessions as it needs to keep its rate busy, so a cold start sends a
burst of first turns that no warm deployment sees (docs/results.md §Steady
state). A run therefore warms up once and then climbs a staircase:

- arrivals ramp linearly from 0 to the first rate, and from each rate to the
  next, so the sessions a higher rate needs open gradually;
- the hit-target sampler restarts when the first ramp ends, so the forced
  misses of the cold start do not bias the target mix of the windows;
- each step holds its rate for `settle_s`, then `measure_s` whose requests
  form its window; only windows are summarised;
- a step whose window clearly misses the SLA ends the climb (higher rates
  would only queue more).

Loads are given in emulated time; with a time dilation k the client offers
rate / k in real time, waits k times longer, and reads its records back in
emulated time (services/experiments/dilation.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from loadgen.bench.client import SSE_LINE_LIMIT, stream_completion
from loadgen.bench.dispatch import Dispatcher, Recorder, RunClock
from loadgen.bench.drive import drive_open_loop
from loadgen.hitbins import HitTargetSampler
from loadgen.plan import RequestPlan
from loadgen.spec import parse_spec
from loadgen.summary import SlaConfig, Summary, meets_sla, summarize
from loadgen.workloads import AgenticConfig, AgenticWorkload
from services.experiments.dilation import to_emulated_record
from services.experiments.rates import RateProfile, Step, Window, staircase_profile

STOP_BELOW_ATTAINMENT = 0.6  # a window this far under the 0.9 target is past saturation


class SteadyAgenticWorkload(AgenticWorkload):
    """Agentic sessions whose hit-target accounting can restart once the cold start is over."""

    def restart_targets(self) -> None:
        if self.config.hits:
            self._sampler = HitTargetSampler(self.config.hits, random.Random(self._rng.getrandbits(64)))


@dataclass(frozen=True)
class Staircase:
    """Offered load in emulated time: the steps, and how the client runs them."""

    steps: tuple[Step, ...]
    seed: int = 0
    request_timeout_s: float = 300.0
    dilation: float = 1.0  # real seconds per emulated second


@dataclass
class StepResult:
    window: Window
    summary: Summary
    window_dir: Path


def window_records(records: list[dict], window: Window) -> list[dict]:
    """Requests sent in the window, with send times re-based to its start."""
    return [{**r, "send_s": r["send_s"] - window.start_s} for r in records
            if window.start_s <= r["send_s"] < window.end_s]


def _clearly_failing(records: list[dict], window: Window, sla: SlaConfig) -> bool:
    done = [r for r in records if window.start_s <= r["send_s"] < window.end_s]
    return bool(done) and sum(meets_sla(r, sla) for r in done) < STOP_BELOW_ATTAINMENT * len(done)


async def run_staircase(url: str, model: str, workload_spec: str, stairs: Staircase, out_dir: Path, sla: SlaConfig,
                        label: str, cost_per_hour: float | None = None,
                        after_ramp: Callable[[], Awaitable[None]] | None = None) -> list[StepResult]:
    """Climb the staircase against `url`; one summarised window per step reached.

    `after_ramp` runs when the first ramp ends (the cold start is over).
    """
    config = parse_spec(workload_spec)
    if not isinstance(config, AgenticConfig):
        raise ValueError(f"a staircase needs an agentic workload, got {workload_spec!r}")
    k = stairs.dilation
    profile: RateProfile = staircase_profile(stairs.steps)
    windows = profile.windows
    seeds = random.Random(stairs.seed)
    workload = SteadyAgenticWorkload(config.model_copy(update={"think": config.think * k}),
                                     random.Random(seeds.getrandbits(64)))
    arrivals = (t * k for t in profile.arrivals(random.Random(seeds.getrandbits(64))))
    out_dir.mkdir(parents=True, exist_ok=True)
    endpoint = url.rstrip("/") + "/v1/completions"
    timeout_s = stairs.request_timeout_s * k
    connector = aiohttp.TCPConnector(limit=0)  # an open loop must never queue inside the client
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=SSE_LINE_LIMIT) as http:

        async def send(plan: RequestPlan, send_s: float):
            return await stream_completion(http, endpoint, model, plan, timeout_s=timeout_s, send_s=send_s,
                                           vocab=config.vocab)

        recorder = Recorder(out_dir / "requests.jsonl", False, None)
        stop_sending = asyncio.Event()
        clock = RunClock(profile.end_s * k, stop_sending)
        dispatcher = Dispatcher(send, recorder, clock, None, stop_sending)
        loop = asyncio.get_running_loop()
        reached = [len(windows)]

        def emulated() -> list[dict]:
            return [to_emulated_record(dataclasses.asdict(r), k) for r in recorder.records]

        async def watch() -> None:
            # A window is judged once the next step has settled: by then most of its requests are done.
            for index, window in enumerate(windows[:-1]):
                check_s = windows[index + 1].start_s
                await asyncio.sleep(max(0.0, check_s * k - clock.now()))
                if _clearly_failing(emulated(), window, sla):
                    reached[0] = index + 1
                    stop_sending.set()
                    return

        async def ramped() -> None:
            await asyncio.sleep(stairs.steps[0].ramp_s * k)
            workload.restart_targets()
            if after_ramp is not None:
                await after_ramp()

        timer = loop.call_later(profile.end_s * k, stop_sending.set)
        helpers = [asyncio.create_task(watch()), asyncio.create_task(ramped())]
        try:
            await drive_open_loop(workload, dispatcher, clock, arrivals)
            await dispatcher.drain()
        finally:
            timer.cancel()
            for task in helpers:
                task.cancel()
            outcomes = await asyncio.gather(*helpers, return_exceptions=True)
            recorder.close()
    failures = [o for o in outcomes if isinstance(o, Exception)]
    if failures:
        raise failures[0]  # a failed watch or line change must not pass silently
    records = emulated()
    return [write_window(records, window, out_dir / f"window-{window.rate:g}", sla, label, workload_spec,
                         cost_per_hour) for window in windows[:reached[0]]]


def write_window(records: list[dict], window: Window, window_dir: Path, sla: SlaConfig, label: str,
                 workload_spec: str, cost_per_hour: float | None) -> StepResult:
    """One window as a bench output folder of its own (emulated time), so loadgen's reports read it."""
    kept = window_records(records, window)
    summary = summarize(kept, sla=sla, workload=workload_spec, offered_rate=window.rate, label=label,
                        cost_per_hour=cost_per_hour)
    window_dir.mkdir(parents=True, exist_ok=True)
    (window_dir / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    (window_dir / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return StepResult(window, summary, window_dir)
