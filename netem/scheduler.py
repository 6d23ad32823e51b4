"""Play a Schedule against a running link.

Step times are offsets from one start stamp (loop time), so a late wake-up
delays one step, never the ones after it. Stopping cancels the task; the link
keeps whatever the last applied step set.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from netem.config import ConfigError
from netem.schedule import Schedule, Step

if TYPE_CHECKING:
    from netem.link import UserspaceLink


class ScheduleRunner:
    def __init__(self, link: UserspaceLink, schedule: Schedule) -> None:
        self.link = link
        self.schedule = schedule
        self.cycle = 0
        self.applied = 0
        self.errors: list[str] = []
        self.started_at: float | None = None
        self._next_at: float | None = None
        self._task: asyncio.Task[None] | None = None
        self.stepped = asyncio.Event()  # set after every applied step, for watchers

    def start(self) -> ScheduleRunner:
        self._task = self.link.spawn(self._run())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def join(self) -> None:
        """Wait until a schedule without loop has played its last step."""
        if self._task is not None:
            await asyncio.shield(self._task)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        self.started_at = start = loop.time()
        while True:
            offset = start + self.cycle * (self.schedule.period or 0.0)
            for step in self.schedule.steps:
                self._next_at = offset + step.at
                delay = self._next_at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                self.apply(step)
            if not self.schedule.loop:
                self._next_at = None
                return
            self.cycle += 1

    def apply(self, step: Step) -> None:
        try:
            if step.patch:
                self.link.reconfigure(step.patch)
            if step.heal is not None:
                self.link.heal(step.heal)
            if step.partition is not None:
                p = step.partition
                self.link.partition(p.mode, p.direction, p.duration)
            if step.reset:
                self.link.reset_connections()
        except ConfigError as err:
            # Steps were validated against defaults; record what the live link refused and go on.
            self.errors.append(f"step at {step.at:g}s: {err}")
        self.applied += 1
        self.stepped.set()

    def status(self) -> dict[str, Any]:
        now = asyncio.get_running_loop().time()
        return {
            "running": self.running,
            "cycle": self.cycle,
            "steps_applied": self.applied,
            "elapsed_s": None if self.started_at is None else now - self.started_at,
            "next_step_in_s": None if self._next_at is None or not self.running else max(0.0, self._next_at - now),
            "errors": self.errors[-10:],
        }
