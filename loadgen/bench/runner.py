"""run_bench: one benchmark run from config to requests.jsonl and summary.json.

One aiohttp ClientSession for the whole run, with no connection cap: an open
loop must never queue requests inside the client.
"""

from __future__ import annotations

import asyncio
import random
import signal
from contextlib import contextmanager

import aiohttp

from loadgen.arrivals import arrival_offsets
from loadgen.bench.client import SSE_LINE_LIMIT, stream_completion
from loadgen.bench.config import BenchConfig
from loadgen.bench.dispatch import Dispatcher, Recorder, RunClock
from loadgen.bench.drive import drive_closed_loop, drive_open_loop, drive_trace_timing
from loadgen.plan import RequestPlan, Workload
from loadgen.summary import Summary, summarize
from loadgen.tokens import DEFAULT_VOCAB
from loadgen.workloads import build_workload


class BenchError(RuntimeError):
    """The run could not start: the server is unreachable or the settings do not fit the workload."""


async def discover_model(http: aiohttp.ClientSession, url: str, timeout_s: float = 30.0) -> str:
    """The first model the router lists at GET /v1/models."""
    models_url = url.rstrip("/") + "/v1/models"
    try:
        async with asyncio.timeout(timeout_s):
            async with http.get(models_url) as response:
                body = await response.json(content_type=None)
                response.raise_for_status()
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        raise BenchError(f"cannot list models at {models_url}: {type(error).__name__}: {error}; pass --model") from None
    models = body.get("data") if isinstance(body, dict) else None
    if not models:
        raise BenchError(f"{models_url} lists no models; pass --model")
    return str(models[0]["id"])


def resolve_pacing(config: BenchConfig, workload: Workload) -> tuple[float | None, int | None]:
    """(rate, concurrency); (None, None) means the workload's own timestamps."""
    if config.rate is not None or config.concurrency is not None:
        return config.rate, config.concurrency
    if workload.own_timing:
        return None, None
    if workload.default_rate is not None:
        return workload.default_rate, None
    raise BenchError(f"workload {workload.name} has no timing of its own: give a rate or a concurrency")


async def run_bench(config: BenchConfig, *, handle_sigint: bool = False) -> Summary:
    """Run the benchmark; writes OUT/requests.jsonl and OUT/summary.json and returns the summary.

    Cancelling the calling task, or Ctrl-C when `handle_sigint`, stops the run:
    in-flight requests are recorded as cancelled and the partial summary is written.
    """
    seeds = random.Random(config.seed)
    spec = config.workload_config
    workload = build_workload(spec, random.Random(seeds.getrandbits(64)))
    rate, concurrency = resolve_pacing(config, workload)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    vocab = getattr(spec, "vocab", DEFAULT_VOCAB)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=config.request_timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=SSE_LINE_LIMIT) as http:
        model = config.model or await discover_model(http, config.url)

        async def send(plan: RequestPlan, send_s: float):
            return await stream_completion(
                http, config.endpoint, model, plan, timeout_s=config.request_timeout_s, send_s=send_s, vocab=vocab
            )

        recorder = Recorder(config.out_dir / "requests.jsonl", config.progress, config.max_requests)
        stop_sending = asyncio.Event()
        clock = RunClock(config.duration_s, stop_sending)
        dispatcher = Dispatcher(send, recorder, clock, config.max_requests, stop_sending)
        timer = asyncio.get_running_loop().call_later(config.duration_s, stop_sending.set)
        try:
            with _sigint_interrupts(dispatcher, handle_sigint):
                if concurrency is not None:
                    await drive_closed_loop(workload, dispatcher, clock, concurrency)
                elif rate is not None:
                    arrivals = arrival_offsets(rate, random.Random(seeds.getrandbits(64)),
                                               workload.arrival_shape, workload.arrival_cv)
                    await drive_open_loop(workload, dispatcher, clock, arrivals)
                else:
                    await drive_trace_timing(workload, dispatcher, clock)
                await dispatcher.drain()
        except asyncio.CancelledError:
            dispatcher.interrupt()
            await dispatcher.drain()
            _write_summary(config, recorder, rate, concurrency, dispatcher)
            raise
        finally:
            timer.cancel()
            recorder.close()
    return _write_summary(config, recorder, rate, concurrency, dispatcher)


@contextmanager
def _sigint_interrupts(dispatcher: Dispatcher, enabled: bool):
    if not enabled:
        yield
        return
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        # a second Ctrl-C falls back to the default handler and ends the process
        loop.remove_signal_handler(signal.SIGINT)
        dispatcher.interrupt()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _write_summary(config: BenchConfig, recorder: Recorder, rate, concurrency, dispatcher: Dispatcher) -> Summary:
    summary = summarize(
        [record.row() for record in recorder.records], sla=config.sla, workload=config.workload_spec,
        offered_rate=rate, concurrency=concurrency, label=config.label,
        cost_per_hour=config.cost_per_hour, skipped_arrivals=dispatcher.skipped_arrivals,
        interrupted=dispatcher.interrupted,
    )
    (config.out_dir / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return summary
