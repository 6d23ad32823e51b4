"""What every service exposes besides its own API: /health, /metrics, /stats, and loop lag.

The event-loop lag monitor measures how late a periodic timer fires; the
emulator's own overhead distorts emulated timings by about that much, so it is
exported (pdd_event_loop_lag_seconds) and kept for p99 reports.

"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from typing import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest

LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5)
REGISTRY_KEY = web.AppKey("registry", CollectorRegistry)
STATS_KEY = web.AppKey("stats", Callable)
LAG_KEY = web.AppKey("lag", object)
DRAINING_KEY = web.AppKey("draining", Callable)


# Every tick wakes an idle process, about 0.1 ms of CPU on a 2-core machine: 12-13 ms/s per service at
# 10 ms, 7-8 at 20 ms, 4-5 at 50 ms (docs/mesh-measured.md §Cost of a streamed token). A tick's lateness does
# not depend on the period, so its percentiles do not either; only the sample count falls (20 a second
# still gives a p99 from every 5-second window).
LAG_INTERVAL_S = 0.05


class LoopLagMonitor:
    def __init__(self, registry: CollectorRegistry, interval_s: float = LAG_INTERVAL_S, keep: int = 20000) -> None:
        self.interval_s = interval_s
        self.samples: collections.deque[float] = collections.deque(maxlen=keep)
        self._hist = Histogram("pdd_event_loop_lag_seconds", "How late a periodic timer fires",
                               buckets=LAG_BUCKETS, registry=registry)
        self._timer: asyncio.TimerHandle | None = None
        self._expected = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._expected = loop.time() + self.interval_s
        self._timer = loop.call_at(self._expected, self._tick, loop)

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        # A timer callback, not a task around asyncio.sleep: these wake-ups are most of what an idle
        # service spends, and a task's sleep adds a future, a task step and a second pass of the loop.
        now = loop.time()
        lag = max(0.0, now - self._expected)
        self.samples.append(lag)
        self._hist.observe(lag)
        self._expected = now + self.interval_s
        self._timer = loop.call_at(self._expected, self._tick, loop)

    def percentile(self, q: float) -> float:
        if not self.samples:
            return 0.0
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def reset(self) -> None:
        self.samples.clear()


async def _health(request: web.Request) -> web.Response:
    # A drained service is alive but takes no work: 503, so `pdd-emu status` and a load balancer's
    # readiness check stop counting it, while anything that only asks "does it answer" still sees it.
    if request.app[DRAINING_KEY]():
        return web.json_response({"status": "draining", "t": time.time()}, status=503)
    return web.json_response({"status": "ok", "t": time.time()})


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[REGISTRY_KEY])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _stats(request: web.Request) -> web.Response:
    lag: LoopLagMonitor = request.app[LAG_KEY]
    stats = dict(request.app[STATS_KEY]())
    stats["loop_lag_s"] = {"p50": lag.percentile(0.5), "p99": lag.percentile(0.99), "samples": len(lag.samples)}
    stats["asyncio_tasks"] = len(asyncio.all_tasks())  # a count that only grows is a leak (docs/reliability.md)
    if request.query.get("reset_lag") == "1":
        lag.reset()
    return web.Response(text=json.dumps(stats), content_type="application/json")


def add_ops_routes(app: web.Application, registry: CollectorRegistry, stats: Callable[[], dict],
                   draining: Callable[[], bool] = lambda: False) -> LoopLagMonitor:
    """Mount /health, /metrics and /stats on `app`; the lag monitor runs while the app does."""
    lag = LoopLagMonitor(registry)
    app[DRAINING_KEY] = draining
    app[REGISTRY_KEY] = registry
    app[STATS_KEY] = stats
    app[LAG_KEY] = lag
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/stats", _stats)

    async def lag_ctx(_app: web.Application):
        lag.start()
        yield
        await lag.stop()

    app.cleanup_ctx.append(lag_ctx)
    return lag


async def serve_until_signalled(stop: asyncio.Event) -> None:
    """Block until SIGTERM/SIGINT, then let the caller drain and clean up."""
    import signal

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
