"""The chaos faults on the in-process mesh: on the WAN KV links only, for their length, then the link's own settings."""

from __future__ import annotations

import asyncio
import random

import pytest

from services.chaos.faults import KillRestart, WanJitter, WanPartition
from services.scenario.loader import load_scenario
from services.simulate.faults import Timed, apply, draw_schedule, play, wan_kv_links
from services.simulate.outage import OutageMesh
from services.simulate.wiring import simulated_plan
from services.types import Role
from tests.services.simulate.on_virtual_time import on_virtual_time

WAN, RDMA = "prefill-to-main-decode", "prefill-to-relay-decode"


def test_a_partition_holds_the_wan_kv_links_for_its_length_and_leaves_the_rest():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            loop = asyncio.get_running_loop()
            start = loop.time()
            applying = asyncio.ensure_future(apply(mesh, Timed(0.0, WanPartition("blackhole", 2.0))))
            await asyncio.sleep(1.0)
            assert mesh.links[WAN].stats()["up"]["partition"] == "blackhole"
            assert mesh.links[RDMA].stats()["up"]["partition"] is None
            await applying
            assert loop.time() - start == pytest.approx(2.0)
            assert mesh.links[WAN].stats()["up"]["partition"] is None

    on_virtual_time(main)


def test_a_jitter_schedule_plays_its_delays_then_restores_the_link():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            link = mesh.links[WAN]
            own = link.config.up
            applying = asyncio.ensure_future(apply(mesh, Timed(0.0, WanJitter((1.5, 0.5), hold_s=1.0,
                                                                               rate_drop_s=1.0))))
            seen = []
            for _ in range(3):
                await asyncio.sleep(0.9)
                seen.append((link.config.up.delay_s, link.config.up.rate_bps))
                await asyncio.sleep(0.1)
            await applying
            assert seen == [(1.5, own.rate_bps), (0.5, own.rate_bps), (own.delay_s, own.rate_bps / 10)]
            assert link.config.up == own

    on_virtual_time(main)


def test_a_schedule_kills_at_its_moment_and_the_keeper_restarts_after_down_s():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            loop = asyncio.get_running_loop()
            start = loop.time()
            playing = asyncio.ensure_future(play(mesh, [Timed(1.0, KillRestart(Role.RELAY_DECODE), down_s=2.0)]))
            await asyncio.sleep(1.5)
            assert mesh.down == {"relay-decode"}
            await playing
            assert loop.time() - start == pytest.approx(3.0) and not mesh.down and mesh.kills == 1

    on_virtual_time(main)


def test_schedules_follow_their_seed_and_the_plan():
    pdd = simulated_plan(load_scenario("pdd-mini"))
    assert draw_schedule(random.Random(5), pdd, 3.0) == draw_schedule(random.Random(5), pdd, 3.0)
    drawn = [t for seed in range(40) for t in draw_schedule(random.Random(seed), pdd, 3.0)]
    assert {type(t.fault) for t in drawn} == {WanPartition, WanJitter, KillRestart}
    assert all(0 <= t.at_s <= 3.0 for t in drawn)
    intra = simulated_plan(load_scenario("pd-intra-mini"))
    assert not wan_kv_links(intra)
    kinds = {(type(t.fault), getattr(t.fault, "role", None))
             for seed in range(20) for t in draw_schedule(random.Random(seed), intra, 3.0)}
    assert kinds == {(KillRestart, Role.PREFILL), (KillRestart, Role.DECODE)}


def test_a_jitter_schedule_replacing_another_still_returns_the_link_to_its_own_settings():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            link = mesh.links[WAN]
            own = link.config.up
            await play(mesh, [Timed(0.0, WanJitter((1.5,), hold_s=2.0, rate_drop_s=1.0)),
                              Timed(1.0, WanJitter((0.5,), hold_s=1.0, rate_drop_s=1.0))])
            assert link.config.up == own

    on_virtual_time(main)
