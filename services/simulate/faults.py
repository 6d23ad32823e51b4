"""The chaos faults (services/chaos/faults.py) on the in-process mesh, at set moments of virtual time.

The vocabulary is the chaos catalogue's own: `WanPartition(mode, duration_s)`,
`WanJitter(delays_s, hold_s, rate_drop_s)` and `KillRestart(role)`, applied
to what they touch in the mesh:

- a partition and a jitter schedule act on every WAN KV link (the links
  `ChaosMesh.wan_links` picks), through the link's own `partition` and
  `run_schedule`, so they mean exactly what they mean on the mesh's links;
- a kill takes the first pool with the role, as the chaos run does, and its
  keeper has it serving again `down_s` later (`OutageMesh`).

`draw_schedule` draws a random schedule from a seed, sized for short runs.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import asdict, dataclass
from typing import Union

from netem.schedule import Schedule
from services.chaos.faults import KillRestart, WanJitter, WanPartition
from services.scenario.link_config import real_link_config
from services.scenario.plan import LinkPlan, MeshPlan
from services.simulate.outage import OutageMesh
from services.types import Role

Fault = Union[WanPartition, WanJitter, KillRestart]
KEEPER_BACKOFF_S = 0.5  # the keeper's first restart delay (services/launcher/keeper.py --backoff)
# The mesh's kill-restart runs measured 3.1-7.7 s down on the loaded 2-core machine (docs/reliability.md,
# quick runs); a campaign draws from the back-off up to that.
DOWN_S = (KEEPER_BACKOFF_S, 8.0)
KILLABLE = (Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE, Role.DECODE, Role.COLOCATED)


@dataclass(frozen=True)
class Timed:
    """One fault of a schedule: applied `at_s` after the traffic starts; a kill's service is down `down_s`."""

    at_s: float
    fault: Fault
    down_s: float = DOWN_S[0]

    def describe(self) -> dict:
        fields = {key: value for key, value in asdict(self.fault).items() if key != "name"}
        return {"at_s": self.at_s, "fault": self.fault.name, **fields,
                **({"down_s": self.down_s} if isinstance(self.fault, KillRestart) else {})}


def wan_kv_links(plan: MeshPlan) -> list[LinkPlan]:
    """The links the chaos faults act on (services/chaos/mesh.py `wan_links`)."""
    return [link for link in plan.links if link.kind == "wan" and link.purpose == "kv"]


def killable(plan: MeshPlan) -> list[Role]:
    return [role for role in KILLABLE if plan.with_role(role)]


async def apply(mesh: OutageMesh, timed: Timed) -> None:
    """Start the fault now, hold it for its length, end it."""
    fault = timed.fault
    plans = wan_kv_links(mesh.plan)
    if isinstance(fault, WanPartition):
        for plan in plans:
            mesh.links[plan.name].partition(fault.mode, "both", fault.duration_s)  # healed by the link in time
        await asyncio.sleep(fault.duration_s)
    elif isinstance(fault, WanJitter):
        runners = []
        for plan in plans:
            # The link's planned settings, not its current ones: they are what the schedule returns to,
            # even when it replaces another jitter schedule still playing.
            own = real_link_config(plan, mesh.plan.scenario.byte_scale).model_dump(by_alias=True)["up"]
            runners.append(await mesh.links[plan.name].run_schedule(Schedule.model_validate(fault.schedule(own))))
        for runner in runners:
            await runner.join()  # cancelled when a later jitter schedule replaces this one
    else:
        name = mesh.plan.with_role(fault.role)[0].name
        mesh.kill(name)
        await asyncio.sleep(timed.down_s)
        await mesh.restart(name)


async def play(mesh: OutageMesh, schedule: list[Timed]) -> None:
    """Every fault of `schedule` at its moment (loop time from now); returns when the last has ended.

    Two faults of the same kind may overlap: a second partition or jitter schedule replaces the
    first, as on the mesh's links; a kill of a service that is down already waits for its restart.
    """
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def at(timed: Timed) -> None:
        await asyncio.sleep(max(0.0, start + timed.at_s - loop.time()))
        if isinstance(timed.fault, KillRestart):
            name = mesh.plan.with_role(timed.fault.role)[0].name
            while name in mesh.down:
                await asyncio.sleep(KEEPER_BACKOFF_S)
        await apply(mesh, timed)

    async with asyncio.TaskGroup() as group:
        for timed in schedule:
            group.create_task(at(timed))


def draw_schedule(rng: random.Random, plan: MeshPlan, window_s: float, max_faults: int = 3) -> list[Timed]:
    """1 to `max_faults` faults at random moments of `window_s`, of the kinds the plan has room for.

    Lengths are short (a run is a few seconds): partitions of 0.2-3 s, jitter steps of 0.2-1 s
    with delays of 50 ms-2 s, kills down 0.5-8 s.
    """
    kinds = (["partition", "jitter"] if wan_kv_links(plan) else []) + (["kill"] if killable(plan) else [])
    if not kinds:
        return []
    schedule = []
    for _ in range(rng.randint(1, max_faults)):
        at_s = round(rng.uniform(0, window_s), 3)
        kind = rng.choice(kinds)
        if kind == "partition":
            fault: Fault = WanPartition(rng.choice(("blackhole", "reject")), round(rng.uniform(0.2, 3.0), 3))
            schedule.append(Timed(at_s, fault))
        elif kind == "jitter":
            delays = tuple(round(rng.uniform(0.05, 2.0), 3) for _ in range(rng.randint(1, 3)))
            schedule.append(Timed(at_s, WanJitter(delays, hold_s=round(rng.uniform(0.2, 1.0), 3),
                                                  rate_drop_s=round(rng.uniform(0.2, 1.0), 3))))
        else:
            schedule.append(Timed(at_s, KillRestart(rng.choice(killable(plan))), round(rng.uniform(*DOWN_S), 3)))
    return sorted(schedule, key=lambda timed: timed.at_s)
