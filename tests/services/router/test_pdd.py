"""The PDD pipeline choice at the router under a burst, without a mesh."""

from __future__ import annotations

import asyncio

from services.rpc import pb
from services.launcher.plan import build_plan
from services.router import pdd as pdd_module
from services.router.peers import Peers
from services.router.pipelines import Job
from services.router.relay_slot import relay_dispatches
from services.scenario import load_scenario
from services.scenario.sizing import instance_sizing
from services.types import Mode, Pipeline, Role


class _Relay:
    """A relay whose cache lookups all answer together, idle, once the whole burst has asked."""

    def __init__(self, burst: int) -> None:
        self.asked, self.burst, self.everyone = 0, burst, asyncio.Event()

    async def CacheLookup(self, request, timeout, metadata):  # noqa: N802 (the gRPC method's name)
        self.asked += 1
        if self.asked == self.burst:
            self.everyone.set()
        await asyncio.wait_for(self.everyone.wait(), 5.0)
        return pb.CacheLookupReply(hit_tokens=0, load=0.0, instance="relay-decode-0")


async def test_a_burst_that_looked_the_relay_up_together_does_not_overfill_it(monkeypatch):
    peers = Peers.__new__(Peers)  # no channels: the stubs stand in for them
    peers.plan = build_plan(load_scenario("pdd-mini", ["engine.max_running=4", "wan.delay_s=2s"]))
    relay_plan, md_plan = peers.services(Role.RELAY_DECODE)[0], peers.services(Role.MAIN_DECODE)[0]
    capacity = relay_plan.pool.count * instance_sizing(peers.plan.scenario, relay_plan.pool).max_running
    burst = 3 * capacity
    peers.decode = {relay_plan.name: _Relay(burst)}
    peers.kv_bytes_per_token = 1 << 20  # every transfer long: each request wants the relay

    async def best_decode(peers, job, roles):
        return md_plan, 0
    monkeypatch.setattr(pdd_module, "best_decode", best_decode)
    chosen, held, release = [], [], asyncio.Event()

    async def pipeline(name):
        chosen.append(name)
        held.append(relay_dispatches(peers)[relay_plan.name])
        await asyncio.wait_for(release.wait(), 5.0)
        return
        yield

    monkeypatch.setattr(pdd_module, "_relay_then_main", lambda *args: pipeline(Pipeline.P_RLD_MD))
    monkeypatch.setattr(pdd_module, "run_p_d", lambda *args: pipeline(Pipeline.P_MD))

    async def one(i):
        async for _ in pdd_module.pdd(peers, Job(f"r{i}", list(range(512)), 8, 0, 0.0), Mode.PDD):
            pass
    tasks = [asyncio.create_task(one(i)) for i in range(burst)]
    while len(chosen) < burst:
        await asyncio.wait(tasks, timeout=0.01)  # until every request has chosen its pipeline
    relayed = chosen.count(Pipeline.P_RLD_MD)
    bound = peers.plan.scenario.pdd.relay_max_load * capacity
    assert 0 < relayed <= bound + 1 and max(held) == relayed
    assert chosen.count(Pipeline.P_MD) == burst - relayed
    release.set()
    await asyncio.gather(*tasks)
    assert relay_dispatches(peers)[relay_plan.name] == 0  # every slot given back


async def test_only_a_request_with_a_long_transfer_asks_the_relay(monkeypatch):
    peers = Peers.__new__(Peers)
    peers.plan = build_plan(load_scenario("pdd-mini"))
    relay_plan, md_plan = peers.services(Role.RELAY_DECODE)[0], peers.services(Role.MAIN_DECODE)[0]
    relay = _Relay(burst=1)
    peers.decode = {relay_plan.name: relay}

    async def best_decode(peers, job, roles):
        return md_plan, 0
    monkeypatch.setattr(pdd_module, "best_decode", best_decode)
    chosen = []

    async def pipeline(name):
        chosen.append(name)
        return
        yield

    monkeypatch.setattr(pdd_module, "_relay_then_main", lambda *args: pipeline(Pipeline.P_RLD_MD))
    monkeypatch.setattr(pdd_module, "run_p_d", lambda *args: pipeline(Pipeline.P_MD))
    peers.kv_bytes_per_token = 1  # 512 bytes cross the WAN in its delay: P-MD, whatever the relay's load
    async for _ in pdd_module.pdd(peers, Job("short", list(range(512)), 8, 0, 0.0), Mode.PDD):
        pass
    assert chosen == [Pipeline.P_MD] and relay.asked == 0
    peers.kv_bytes_per_token = 1 << 21  # 1 GB: 0.86 s over the 10 Gbit/s line, past the 0.5 s threshold
    async for _ in pdd_module.pdd(peers, Job("long", list(range(512)), 8, 0, 0.0), Mode.PDD):
        pass
    assert chosen == [Pipeline.P_MD, Pipeline.P_RLD_MD] and relay.asked == 1
