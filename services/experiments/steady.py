"""Benchmark runs that measure steady states: a staircase of agent populations, each with a measured window.

Agents are closed-loop (services/experiments/population.py): each runs one
agentic session at a time, sends a turn when the previous answer has arrived
and its think time has passed, and opens a new session when one ends. They are
the bench's own closed-loop users (loadgen/bench/drive.py), each joining at its
step's time. An agent's first turn is always a cache miss, so a cold start is a
burst that no warm deployment sees (docs/experiments.md §Steady state). A run
therefore:

- starts the agents of each step evenly over its ramp;
- summarises only each step's window (requests sent in it);
- stops climbing once a window clearly misses the SLA.

Durations are given in emulated time; with a time dilation k the client waits
k times longer and reads its records back in emulated time
(services/experiments/dilation.py).
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
from loadgen.bench.drive import drive_closed_loop
from loadgen.plan import RequestPlan
from loadgen.spec import parse_spec
from loadgen.summary import SlaConfig, Summary, meets_sla, summarize
from loadgen.workloads import AgenticConfig, AgenticWorkload
from services.experiments.dilation import to_emulated_record
from services.experiments.population import Step, Window, staircase

STOP_BELOW_ATTAINMENT = 0.6  # a window this far under the 0.9 target is past saturation


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

    @property
    def request_rate(self) -> float:
        """Requests sent per second in the window: what the agents offered."""
        return self.summary.sent / self.window.seconds

    @property
    def goodput_rps(self) -> float:
        """Requests sent in the window that met the SLA, per second of window."""
        return self.summary.within_sla / self.window.seconds

    def wan_utilisation(self, wan_rate_bps: float) -> float:
        """Emulated WAN bytes of the window's requests against what the line could carry in the window."""
        return self.summary.wan_bytes * 8 / (wan_rate_bps * self.window.seconds)


def window_records(records: list[dict], window: Window) -> list[dict]:
    """Requests sent in the window, with send times re-based to its start."""
    return [{**r, "send_s": r["send_s"] - window.start_s} for r in records
            if window.start_s <= r["send_s"] < window.end_s]


def _clearly_failing(records: list[dict], sends: list[float], window: Window, sla: SlaConfig) -> bool:
    """Judged on every request sent in the window: one still unanswered a step later counts as missing."""
    sent = sum(window.start_s <= t < window.end_s for t in sends)
    good = sum(meets_sla(r, sla) for r in records if window.start_s <= r["send_s"] < window.end_s)
    return sent > 0 and good < STOP_BELOW_ATTAINMENT * sent


async def run_staircase(url: str, model: str, workload_spec: str, stairs: Staircase, out_dir: Path, sla: SlaConfig,
                        label: str, cost_per_hour: float | None = None,
                        after_ramp: Callable[[], Awaitable[None]] | None = None) -> list[StepResult]:
    """Climb the staircase of agents against `url`; one summarised window per step reached.

    `after_ramp` runs when the first ramp ends (the cold start is over).
    """
    config = parse_spec(workload_spec)
    if not isinstance(config, AgenticConfig):
        raise ValueError(f"a staircase needs an agentic workload, got {workload_spec!r}")
    k = stairs.dilation
    population = staircase(stairs.steps)
    windows = population.windows
    real_think_s = config.think * k
    workload = AgenticWorkload(config.model_copy(update={"think": real_think_s}), random.Random(stairs.seed))
    out_dir.mkdir(parents=True, exist_ok=True)
    endpoint = url.rstrip("/") + "/v1/completions"
    timeout_s = stairs.request_timeout_s * k
    connector = aiohttp.TCPConnector(limit=0)  # no agent may queue inside the client
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=SSE_LINE_LIMIT) as http:

        async def send(plan: RequestPlan, send_s: float):
            return await stream_completion(http, endpoint, model, plan, timeout_s=timeout_s, send_s=send_s,
                                           vocab=config.vocab)

        recorder = Recorder(out_dir / "requests.jsonl", False, None)
        stop_sending = asyncio.Event()
        clock = RunClock(population.end_s * k, stop_sending)
        dispatcher = Dispatcher(send, recorder, clock, None, stop_sending)
        loop = asyncio.get_running_loop()
        reached = [len(windows)]
        sends: list[float] = []  # emulated send times, answered or not

        def emulated() -> list[dict]:
            return [to_emulated_record(dataclasses.asdict(r), k) for r in recorder.records]

        async def watch() -> None:
            # A window is judged once the next step has settled: by then most of its requests are done.
            for index, window in enumerate(windows[:-1]):
                check_s = windows[index + 1].start_s
                await asyncio.sleep(max(0.0, check_s * k - clock.now()))
                if _clearly_failing(emulated(), sends, window, sla):
                    reached[0] = index + 1
                    stop_sending.set()
                    return

        async def ramped() -> None:
            await asyncio.sleep(stairs.steps[0].ramp_s * k)
            if after_ramp is not None:
                await after_ramp()

        timer = loop.call_later(population.end_s * k, stop_sending.set)
        helpers = [asyncio.create_task(watch()), asyncio.create_task(ramped())]
        try:
            try:
                await drive_closed_loop(workload, dispatcher, clock, len(population.starts),
                                        starts=[start * k for start in population.starts],
                                        on_send=lambda: sends.append(clock.now() / k))
                await dispatcher.drain()
            except asyncio.CancelledError:
                dispatcher.interrupt()  # in-flight requests are cancelled and recorded as such
                await dispatcher.drain()
                raise
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
    return [write_window(records, window, out_dir / f"window-{window.users}", sla, label, workload_spec,
                         cost_per_hour) for window in windows[:reached[0]]]


def write_window(records: list[dict], window: Window, window_dir: Path, sla: SlaConfig, label: str,
                 workload_spec: str, cost_per_hour: float | None) -> StepResult:
    """One window as a bench output folder of its own (emulated time), so loadgen's reports read it."""
    kept = window_records(records, window)
    summary = summarize(kept, sla=sla, workload=workload_spec, offered_rate=len(kept) / window.seconds,
                        concurrency=window.users, label=label, cost_per_hour=cost_per_hour)
    window_dir.mkdir(parents=True, exist_ok=True)
    (window_dir / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    (window_dir / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return StepResult(window, summary, window_dir)
