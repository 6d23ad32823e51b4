"""A bounded history of the mesh's figures, sampled once a tick while someone watches the page.

Reading the page's data costs the router one join of bytes it already holds: the links' control APIs and
the keepers' files are read here, once a tick whatever the number of viewers, and only while a viewer has
asked for data in the last IDLE_STOP_S; an unwatched router pays nothing. The history is a ring of
HISTORY samples and EVENTS events, each encoded once, so an answer never grows past a fixed size.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

import aiohttp
import msgspec

from services.router.dashboard.links import LinkWatch
from services.router.dashboard.processes import KeeperWatch
from services.router.dashboard.window import Totals, degraded_since, figures, router_totals

log = logging.getLogger(__name__)
TICK_S = 1.0
WINDOW_S = 10.0  # rates, shares and percentiles are over the requests of the last WINDOW_S
HISTORY = 300  # five minutes of samples
EVENTS = 200
IDLE_STOP_S = 30.0  # no viewer asked for this long: stop sampling
_encode = msgspec.json.Encoder().encode


class Sampler:
    def __init__(self, router: Any, link_token: str | None, tick_s: float = TICK_S,
                 idle_stop_s: float = IDLE_STOP_S) -> None:
        self.router, self.sla, self.link_token = router, router.scenario.sla, link_token
        self.tick_s, self.idle_stop_s = tick_s, idle_stop_s
        self.links: LinkWatch | None = None  # once the router runs: `open`
        self.keepers = KeeperWatch(router.plan)
        self.seq = 0
        self.samples: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=HISTORY)
        self.events: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=EVENTS)
        self.processes: list[dict[str, Any]] = []
        self.totals = Totals()  # at the last tick
        self._window: collections.deque[tuple[float, Totals]] = collections.deque(maxlen=round(WINDOW_S / tick_s) + 1)
        self._task: asyncio.Task | None = None
        self._asked = 0.0

    def open(self, http: aiohttp.ClientSession) -> None:
        """Read the links over `http`, the router's one session for them, from now on."""
        self.links = LinkWatch(self.router.plan, http, self.link_token)

    def watched(self) -> None:
        """A viewer asked for data: sample (again) until nobody has for IDLE_STOP_S."""
        self._asked = time.monotonic()
        if self.links is not None and (self._task is None or self._task.done()):
            self._window.clear()  # rates never span a pause in sampling
            self._task = asyncio.get_running_loop().create_task(self._run(), name="dashboard-sampler")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while time.monotonic() - self._asked < self.idle_stop_s:
            try:
                await self.tick()
            except Exception:  # a defect here must not end the page for good: log it, try next tick
                log.exception("the dashboard's sample failed")
            next_tick = max(next_tick + self.tick_s, loop.time())  # a slow tick shifts the next, never bunches them
            await asyncio.sleep(next_tick - loop.time())

    async def tick(self) -> None:
        # The router's figures in one synchronous step, before any await: the counters and the window's
        # requests then describe the same moment, so no request counts in one and not the other.
        now = time.monotonic()
        totals, previous = router_totals(self.router), self.totals
        self.totals = totals
        self._window.append((now, totals))
        sample: dict[str, Any] = {"t": time.time(), "inflight": self.router.inflight}
        then, before = self._window[0]
        if now > then:  # a window of at least one tick: rates and percentiles over it
            sample.update(figures(totals, before, self.router.metrics.recent, then, now - then, self.sla))
        sample["links"], link_events = await self.links.poll() if self.links is not None else ({}, [])
        self.processes, process_events = self.keepers.poll()
        self.seq += 1
        sample["seq"] = self.seq
        self.samples.append((self.seq, _encode(sample)))
        degraded = degraded_since(totals, previous)
        for text in (*link_events, *process_events, *([degraded] if degraded else [])):
            self.events.append((self.seq, _encode({"seq": self.seq, "t": sample["t"], "text": text})))

    def data(self, since: int, meta: bytes) -> bytes:
        """The samples and events after `since`, the latest totals and processes, and the page's fixed facts."""
        totals = self.totals
        now = {"seq": self.seq, "completed": totals.completed, "errors": totals.errors,
               "pipelines": totals.pipelines, "degraded": totals.degraded, "processes": self.processes,
               "sampling": self._task is not None and not self._task.done()}
        return b"".join((b'{"meta":', meta, b',"now":', _encode(now),
                         b',"samples":[', b",".join(body for seq, body in self.samples if seq > since),
                         b'],"events":[', b",".join(body for seq, body in self.events if seq > since), b"]}"))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
