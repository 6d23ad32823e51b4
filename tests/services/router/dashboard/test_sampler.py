"""The sampler runs only while someone watches, and never twice at once."""

from __future__ import annotations

import json

import aiohttp
from prometheus_client import CollectorRegistry

from services.launcher.plan import build_plan
from services.router.dashboard.sampler import Sampler
from services.router.server import Router
from services.scenario import load_scenario
from tests.waiting import until


def _now(sampler: Sampler) -> dict:
    return json.loads(sampler.data(0, b"{}"))["now"]


async def test_sampling_starts_when_watched_and_stops_when_nobody_asks():
    router = Router(build_plan(load_scenario("pdd-mini")), CollectorRegistry())
    async with aiohttp.ClientSession() as http:
        sampler = Sampler(router, None, tick_s=0.01, idle_stop_s=0.3)
        sampler.open(http)
        assert not _now(sampler)["sampling"] and sampler.seq == 0  # an unwatched router samples nothing
        sampler.watched()
        task = sampler._task
        await until(lambda: sampler.seq >= 3, "three samples while watched")
        sampler.watched()
        assert sampler._task is task  # a second viewer shares the one sampler
        await until(lambda: not _now(sampler)["sampling"], "sampling stopped once nobody asked", timeout_s=10)
        stopped_at = sampler.seq
        sampler.watched()  # a viewer comes back: sampling starts again, its rates from a fresh window
        await until(lambda: sampler.seq > stopped_at, "sampling again")
        await sampler.close()
        assert not _now(sampler)["sampling"]
