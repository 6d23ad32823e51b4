"""The fault soak: a different fault every minute for the whole run, with the traffic never stopping.

Slot i starts SLOT_S x i after the first; its fault is the i-th of the rotation (kill -9 of each
role, a short blackhole and a short reject of the WAN, a burst of WAN jitter), and the rest of the
slot is recovery. Every process's RSS is read at the start of each slot; the scenario check fails
when one grows by more than the soak's bound (services/chaos/soak.py) between the end of the
warm-up share of the run and its end (a restarted process starts afresh, which only lowers it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from services.chaos.faults import KillRestart, WanJitter, WanPartition, Window
from services.types import Role

SLOT_S = 60.0
QUICK_SLOTS, FULL_SLOTS = 3, 30


def rotation(mode: str) -> list:
    decode = Role.MAIN_DECODE if mode == "pdd" else Role.DECODE
    faults = [KillRestart(decode), WanPartition("blackhole", 5), KillRestart(Role.PREFILL),
              WanPartition("reject", 5), WanJitter((2, 5), hold_s=4, rate_drop_s=4)]
    return faults + [KillRestart(Role.RELAY_DECODE)] if mode == "pdd" else faults


@dataclass(frozen=True)
class Slot:
    """One minute of the soak: wait for the slot's start, read every RSS, strike the fault."""

    index: int
    fault: object
    first_start_s: list  # shared by every slot of one run: when slot 0 began

    @property
    def name(self) -> str:
        return f"{self.index:02d}-{self.fault.name}"

    async def apply(self, run) -> Window:  # type: ignore[no-untyped-def]
        if not self.first_start_s:
            self.first_start_s.append(run.now())
        await asyncio.sleep(max(0.0, self.first_start_s[0] + self.index * SLOT_S - run.now()))
        rss = {name: run.mesh.rss_kib(name) for name in run.mesh.processes}
        window = await self.fault.apply(run)
        return Window(self.name, window.start_s, window.end_s, {**window.notes, "rss_kib": rss})


def slots(quick: bool, mode: str, rng) -> list[Slot]:  # type: ignore[no-untyped-def]
    faults, first = rotation(mode), []
    return [Slot(i, faults[i % len(faults)], first) for i in range(QUICK_SLOTS if quick else FULL_SLOTS)]


def rss_bounded(windows: list[Window], by_pipeline: dict) -> list[str]:
    from services.chaos.soak import RSS_GROWTH_BOUND_KIB, WARMUP_SHARE  # soak imports the catalogue

    after_warmup = windows[min(len(windows) - 1, int(len(windows) * WARMUP_SHARE))].notes["rss_kib"]
    last = windows[-1].notes["rss_kib"]
    return [f"{name} grew {last[name] - start} KiB over the soak (bound {RSS_GROWTH_BOUND_KIB})"
            for name, start in after_warmup.items()
            if start and last.get(name) and last[name] - start > RSS_GROWTH_BOUND_KIB]
