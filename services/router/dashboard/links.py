"""The KV links as the live page shows them: each one's control API read once a tick (netem/control.py).

Counters and settings come back in real units; a KV link carries emulated bytes / byte_scale at a rate
divided by the same factor (docs/mesh.md §Byte scale), so both are multiplied back here and the page
speaks in emulated units, as the reports do. Throughput is the up direction's (sender to receiver: the
KV) delivered bytes over the time between two reads. A change of settings between two reads, a partition
starting or healing, a link that stops answering or starts again: each becomes one event line.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from netem.client import ControlClient, ControlError
from services.scenario.link_config import byte_divisor
from services.scenario.plan import LinkPlan, MeshPlan
from services.units import format_rate

POLL_TIMEOUT_S = 2.0  # a link slower than this to answer misses one tick and says why
SHOWN = ("rate", "delay", "jitter", "loss", "queue", "window")  # the settings an event names when they change


def _setting(name: str, value: Any, divisor: float) -> str:
    if value is None:
        return "unlimited"
    if name == "rate":
        return format_rate(value * divisor)
    if name in ("delay", "jitter"):
        return f"{value * 1e3:g} ms"
    if name == "loss":
        return f"{value * 100:g}%"
    return f"{value * divisor / 2**20:.3g} MiB"  # queue, window


def changes(before: dict, after: dict, divisor: float) -> list[str]:
    """'rate 20gbit -> 5gbit' for every setting that differs: the up direction's, then the down one's where
    it changed otherwise (a patch of "both" reads as one change)."""
    said: list[str] = []
    for side in ("up", "down"):
        for name in SHOWN:
            old, new = before[side].get(name), after[side].get(name)
            text = f"{name} {_setting(name, old, divisor)} -> {_setting(name, new, divisor)}"
            if old != new and text not in said:
                said.append(text if side == "up" else f"{text} (down)")
    return said


class LinkWatch:
    """The mesh's KV links, read over one aiohttp session; `poll` gives their figures and what changed."""

    def __init__(self, plan: MeshPlan, http: aiohttp.ClientSession, token: str | None) -> None:
        self.links = [link for link in plan.links if link.purpose == "kv"]
        self.byte_scale = plan.scenario.byte_scale
        self.clients = {link.name: ControlClient(http, f"http://{link.host}:{link.control_port}", token,
                                                 timeout_s=POLL_TIMEOUT_S) for link in self.links}
        self._bytes: dict[str, tuple[float, int]] = {}  # name -> (monotonic, delivered bytes up) at the last read
        self._config: dict[str, dict] = {}
        self._partition: dict[str, str | None] = {}
        self._failing: set[str] = set()

    async def poll(self) -> tuple[dict[str, dict], list[str]]:
        """Every KV link's figures (or its error), and the events seen since the last poll."""
        events: list[str] = []
        results = await asyncio.gather(*(self._read(link, events) for link in self.links))
        return {link.name: figures for link, figures in zip(self.links, results)}, events

    async def _read(self, link: LinkPlan, events: list[str]) -> dict[str, Any]:
        client = self.clients[link.name]
        try:
            stats, config = await asyncio.gather(client.stats(), client.config())
        except ControlError as err:
            if link.name not in self._failing:
                self._failing.add(link.name)
                events.append(f"link {link.name} does not answer: {err}")
            self._bytes.pop(link.name, None)
            return {"error": str(err)}
        if link.name in self._failing:
            self._failing.discard(link.name)
            events.append(f"link {link.name} answers again")
        return self._figures(link, stats, config, events)

    def _figures(self, link: LinkPlan, stats: dict, config: dict, events: list[str]) -> dict[str, Any]:
        divisor = byte_divisor(link, self.byte_scale)
        up, now = stats["up"], time.monotonic()
        previous = self._bytes.get(link.name)
        self._bytes[link.name] = (now, up["bytes"])
        throughput = None
        if previous is not None and up["bytes"] >= previous[1] and now > previous[0]:
            throughput = (up["bytes"] - previous[1]) * 8 * divisor / (now - previous[0])
        elif previous is not None:
            events.append(f"link {link.name} counts from zero again: it was restarted")
        before = self._config.get(link.name)
        if before is not None and (said := changes(before, config, divisor)):
            events.append(f"link {link.name} reconfigured: {', '.join(said)}")
        self._config[link.name] = config
        partition = up["partition"]
        if self._partition.get(link.name, partition) != partition:
            events.append(f"link {link.name} partitioned ({partition})" if partition else f"link {link.name} healed")
        self._partition[link.name] = partition
        rate = config["up"]["rate"]
        return {"bps": throughput, "rate_bps": rate * divisor if rate else None,
                "queue_bytes": up["queue_bytes"] * divisor, "queue_limit_bytes": up["queue_limit_bytes"] * divisor,
                "backlog_s": up["line_backlog_s"], "delay_s": config["up"]["delay"], "loss": config["up"]["loss"],
                "partition": partition}
