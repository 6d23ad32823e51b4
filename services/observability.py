"""What every service exposes besides its own API: /health, /metrics, /stats, loop lag, bounded serving.

The event-loop lag monitor measures how late a periodic timer fires; the
emulator's own overhead distorts emulated timings by about that much, so it is
exported (pdd_event_loop_lag_seconds) and kept for p99 reports.

Every HTTP server of the mesh starts through `start_http`, which bounds what a
client can hold (docs/reliability.md, "Bounded connections"): an idle or
header-less connection is closed after `keepalive_s` (aiohttp closes a
connection still waiting for a request's headers at its keep-alive timeout,
so this is also the header deadline), and past `max_connections` a new one
gets a 503 and is closed at once.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from dataclasses import dataclass
from typing import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest

LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5)
REGISTRY_KEY = web.AppKey("registry", CollectorRegistry)
STATS_KEY = web.AppKey("stats", Callable)
LAG_KEY = web.AppKey("lag", object)


class LoopLagMonitor:
    def __init__(self, registry: CollectorRegistry, interval_s: float = 0.01, keep: int = 20000) -> None:
        self.interval_s = interval_s
        self.samples: collections.deque[float] = collections.deque(maxlen=keep)
        self._hist = Histogram("pdd_event_loop_lag_seconds", "How late a periodic timer fires",
                               buckets=LAG_BUCKETS, registry=registry)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        expected = loop.time() + self.interval_s
        while True:
            await asyncio.sleep(max(0.0, expected - loop.time()))
            lag = max(0.0, loop.time() - expected)
            self.samples.append(lag)
            self._hist.observe(lag)
            expected = loop.time() + self.interval_s

    def percentile(self, q: float) -> float:
        if not self.samples:
            return 0.0
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def reset(self) -> None:
        self.samples.clear()


async def _health(request: web.Request) -> web.Response:
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


def add_ops_routes(app: web.Application, registry: CollectorRegistry, stats: Callable[[], dict]) -> LoopLagMonitor:
    """Mount /health, /metrics and /stats on `app`; the lag monitor runs while the app does."""
    lag = LoopLagMonitor(registry)
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


@dataclass(frozen=True)
class HttpLimits:
    keepalive_s: float = 15.0  # idle keep-alive, and the time a request's headers may take
    max_connections: int = 256


_REFUSED_BODY = json.dumps({"error": {"message": "too many open connections; retry later",
                                      "type": "server_error", "param": None, "code": None}}).encode()
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s" % (len(_REFUSED_BODY), _REFUSED_BODY))


class _Refused(asyncio.Protocol):
    """A connection past the cap: one 503, then closed; it costs nothing while it lasts."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(_REFUSED)  # type: ignore[attr-defined]
        transport.close()


class BoundedSite(web.TCPSite):
    """A TCPSite that admits at most `max_connections` connections at once."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, max_connections: int) -> None:
        super().__init__(runner, host, port)
        self.max_connections = max_connections
        self.refused = 0

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None

        def admit() -> asyncio.Protocol:
            if len(server.connections) >= self.max_connections:
                self.refused += 1
                return _Refused()
            return server()

        self._server = await asyncio.get_running_loop().create_server(
            admit, self._host, self._port, backlog=self._backlog, reuse_address=self._reuse_address)
        self._bound_port = self._server.sockets[0].getsockname()[1]


async def start_http(app: web.Application, host: str, port: int, limits: HttpLimits = HttpLimits(),
                     **runner_options) -> tuple[web.AppRunner, BoundedSite]:
    """Serve `app` on host:port under `limits`; the caller cleans the runner up."""
    runner = web.AppRunner(app, keepalive_timeout=limits.keepalive_s, **runner_options)
    await runner.setup()
    site = BoundedSite(runner, host, port, limits.max_connections)
    await site.start()
    return runner, site


async def serve_until_signalled(stop: asyncio.Event) -> None:
    """Block until SIGTERM/SIGINT, then let the caller drain and clean up."""
    import signal

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
