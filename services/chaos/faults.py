"""The faults, one class each: applied to a live mesh while its traffic flows.

`apply` starts the fault, holds it, ends it, and returns the window it lasted
(seconds since the run started) with what it observed. Holding a fault for its
duration is the fault itself; everything the code waits *for* is polled with a
deadline.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable

from services.types import Role

if TYPE_CHECKING:
    from services.chaos.runner import RunContext

POLL_S = 0.25
MID_STREAM_WAIT_S = 30.0


@dataclass
class Window:
    name: str
    start_s: float
    end_s: float
    notes: dict = field(default_factory=dict)


async def poll_until(check: Callable[[], Awaitable[bool]], deadline_s: float, what: str) -> None:
    deadline = time.monotonic() + deadline_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {deadline_s:g} s")
        await asyncio.sleep(POLL_S)


async def mid_stream(run: RunContext, service: str, or_receiving: bool = False) -> bool:
    """Wait until `service` runs a sequence (or, `or_receiving`, waits for a KV transfer); False if it did
    not within MID_STREAM_WAIT_S (struck idle)."""
    async def streaming() -> bool:
        stats = await run.mesh.stats(run.http, service)
        receiving = or_receiving and stats.get("transfers_pending", 0) > 0
        return receiving or any(s["running"] for s in stats["instances"].values())

    try:
        await poll_until(streaming, MID_STREAM_WAIT_S, f"{service} running a sequence")
    except TimeoutError:
        return False  # struck anyway; the report says it was idle
    return True


@dataclass(frozen=True)
class WanJitter:
    """KV transfer time wandering through `delays_s` (one-way delay of the WAN's KV direction), each held
    `hold_s`; then the line rate drops to a tenth for `rate_drop_s`; then the link's own settings return."""

    delays_s: tuple[float, ...]
    hold_s: float
    rate_drop_s: float
    name: str = "jitter"

    def schedule(self, up: dict) -> dict:
        steps = [{"at": f"{i * self.hold_s:g}s", "up": {"delay": f"{d:g}s", "queue": _queue_for(up, d)}}
                 for i, d in enumerate(self.delays_s)]
        drop_at = len(self.delays_s) * self.hold_s
        steps.append({"at": f"{drop_at:g}s", "up": {"delay": up["delay"], "rate": up["rate"] / 10}})
        steps.append({"at": f"{drop_at + self.rate_drop_s:g}s", "up": up})
        return {"steps": steps}

    async def apply(self, run: RunContext) -> Window:
        links = run.mesh.wan_links()
        originals = {link.name: (await run.mesh.link(run.http, link).config())["up"] for link in links}
        start = run.now()
        for link in links:
            await run.mesh.link(run.http, link).post_schedule(self.schedule(originals[link.name]))
        length = len(self.delays_s) * self.hold_s + self.rate_drop_s

        async def played() -> bool:
            states = [await run.mesh.link(run.http, link).schedule() for link in links]
            return not any(state["running"] for state in states)

        await poll_until(played, length + 10, "the jitter schedule's end")
        return Window(self.name, start, run.now(), {"delays_s": list(self.delays_s), "rate_drop_s": self.rate_drop_s})


def _queue_for(up: dict, delay_s: float) -> int:
    """Bytes the link must hold to keep its line busy through `delay_s` of propagation.

    The link's queue bound counts propagating bytes too (docs/netem.md), so a 20 s delay behind the
    default 64 MiB bound would cap the line at 64 MiB per 20 s; with the line's rate x delay held, a
    transfer of N bytes takes delay + N / rate, the KV transfer time the fault means to vary.
    """
    if up["rate"] is None:
        return up["queue"]
    return max(up["queue"], int(up["rate"] / 8 * (delay_s + 1)))


@dataclass(frozen=True)
class WanPartition:
    """Every WAN link partitioned both ways: `blackhole` holds the bytes, `reject` resets connections."""

    mode: str
    duration_s: float

    @property
    def name(self) -> str:
        return f"{self.mode}-{self.duration_s:g}s"

    async def apply(self, run: RunContext) -> Window:
        links = run.mesh.wan_links()
        start = run.now()
        for link in links:
            await run.mesh.link(run.http, link).partition(self.mode, "both", f"{self.duration_s:g}s")

        async def healed() -> bool:
            states = [await run.mesh.link(run.http, link).stats() for link in links]
            return all(s[side]["partition"] is None for s in states for side in ("up", "down"))

        await poll_until(healed, self.duration_s + 10, "the partition's end")
        return Window(self.name, start, run.now())


@dataclass(frozen=True)
class KillRestart:
    """kill -9 of the first pool with `role` while it streams; its keeper restarts it (services/launcher/keeper.py)."""

    role: Role

    @property
    def name(self) -> str:
        return f"kill-{self.role.value}"

    async def apply(self, run: RunContext) -> Window:
        service = run.mesh.services(self.role)[0]
        streaming = await mid_stream(run, service.name)
        start = run.now()
        old_pid = await run.mesh.kill(service.name)
        down_s = await run.mesh.restarted(service.name, old_pid)
        return Window(self.name, start, run.now(), {"service": service.name, "mid_stream": streaming,
                                                    "old_pid": old_pid, "new_pid": run.mesh.service_pid(service.name),
                                                    "down_s": round(down_s, 3),
                                                    "restarts": run.mesh.restarts(service.name)})
