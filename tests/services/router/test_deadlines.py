"""Each call's deadline sized to its work, and a Prefill that outlives it: busy (waited for) or hung
(failed as the pool being unavailable, so the request takes the crashed pool's path)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from services.engine.roofline import RooflineClock
from services.launcher.plan import build_plan
from services.router.deadlines import HOST_ALLOWANCE_S, SLACK, CallDeadlines
from services.router.peers import Peers
from services.router.pipelines import Job
from services.router.prefill_target import PrefillTarget, no_prefill_reachable, prefill_any
from services.router.prompts import Resends
from services.rpc import pb
from services.scenario import load_scenario
from services.types import ErrorKind, Role, RoleError
from tests.waiting import until

ALLOWANCE_S = 0.05  # the host's allowance in these tests, so that a hang is found in a fraction of a second


def _plan(*overrides: str):
    return build_plan(load_scenario("pdd-mini", list(overrides)))


def _lone_prefill_s(plan, tokens: int) -> float:
    pool = plan.service("prefill").pool
    engine = plan.scenario.engine
    chunk = engine.long_prefill_token_threshold or engine.max_batched_tokens
    clock = RooflineClock.for_names(pool.gpu, plan.scenario.model, tp=pool.tp)
    return clock.chunked_prefill_seconds(-(-tokens // chunk) * chunk, chunk)


def test_a_small_call_waits_the_hosts_allowance_plus_the_control_routes_round_trip():
    assert CallDeadlines(_plan()).small_s("main-decode") == HOST_ALLOWANCE_S  # gRPC sent directly
    over_wan = CallDeadlines(_plan("control_over_wan=true", "wan.delay_s=40ms"))
    assert over_wan.small_s("main-decode") == pytest.approx(HOST_ALLOWANCE_S + 0.080)
    assert over_wan.small_s("relay-decode") == HOST_ALLOWANCE_S  # same datacenter as the router


def test_a_prefills_deadline_is_the_allowance_plus_twice_its_roofline_time_and_grows_with_the_prompt():
    plan = _plan()
    deadlines = CallDeadlines(plan)
    for tokens in (100, 16_000, 64_000):
        expected = HOST_ALLOWANCE_S + SLACK * _lone_prefill_s(plan, tokens)
        assert deadlines.prefill_s("prefill", tokens) == pytest.approx(expected)
    assert deadlines.prefill_s("prefill", 64_000) > deadlines.prefill_s("prefill", 16_000) > HOST_ALLOWANCE_S


def test_dilation_and_the_announces_round_trip_lengthen_it():
    plan = _plan("time_dilation=3", "control_over_wan=true", "wan.delay_s=40ms")
    work = SLACK * 3 * _lone_prefill_s(plan, 8000)
    assert CallDeadlines(plan).prefill_s("prefill", 8000, ("main-decode", "relay-decode")) == \
        pytest.approx(HOST_ALLOWANCE_S + 0.080 + work)


def test_prefills_outstanding_at_the_pool_lengthen_the_next_ones_deadline_until_they_answer():
    plan = _plan()
    deadlines = CallDeadlines(plan)
    alone = deadlines.prefill_s("prefill", 4000)
    with deadlines.prefilling("prefill", 30_000), deadlines.prefilling("prefill", 30_000):
        queued = deadlines.prefill_s("prefill", 4000)
        assert queued == pytest.approx(alone + SLACK * 2 * _lone_prefill_s(plan, 30_000))
    assert deadlines.outstanding_s["prefill"] == 0.0  # at rest once both answered
    assert deadlines.prefill_s("prefill", 4000) == alone


class _Prefill:
    """A prefill pool's stub: its Prefill answers after `answer_s` (None: never), its Health if `alive`."""

    def __init__(self, answer_s: float | None, alive: bool) -> None:
        self.answer_s, self.alive = answer_s, alive
        self.calls = self.probes = 0
        self.cancelled = asyncio.Event()

    def Prefill(self, request, timeout=None, metadata=None):  # noqa: N802 (the gRPC method's name)
        self.calls += 1
        return self._prefill(request)

    async def _prefill(self, request):
        try:
            await asyncio.sleep(3600 if self.answer_s is None else self.answer_s)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return pb.PrefillReply(request_id=request.request_id, first_token=7)

    async def Health(self, request, timeout=None, metadata=None):  # noqa: N802
        self.probes += 1
        if not self.alive:
            await asyncio.sleep(timeout)
            raise grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       details="Deadline Exceeded")
        return pb.HealthReply(serving=True, role="prefill", name="prefill")


def _peers(stubs: dict, *pools: str) -> Peers:
    scenario = load_scenario("pdd-mini")
    extra = [scenario.pools[0].model_copy(update={"name": name}) for name in pools]
    peers = Peers.__new__(Peers)  # no channels: the stubs stand in for them
    peers.plan = build_plan(scenario.model_copy(update={"pools": (*scenario.pools, *extra)}))
    peers.prefill, peers.decode, peers.resends = stubs, {}, Resends()
    peers.deadlines = CallDeadlines(peers.plan, host_allowance_s=ALLOWANCE_S)
    return peers


def _job() -> Job:
    return Job("r1", [1, 2, 3, 4], 8, 0, 0.0)


async def test_a_hung_prefill_fails_as_unavailable_after_its_deadline_and_a_missed_health_check():
    hung = _Prefill(answer_s=None, alive=False)
    peers = _peers({"prefill": hung})
    request = pb.PrefillRequest(request_id="r1", kv_target="main-decode")
    deadline_s = peers.deadlines.prefill_s("prefill", 4, ("main-decode",))
    with pytest.raises(RoleError) as failed:
        await asyncio.wait_for(peers.submit_prefill("prefill", request, _job()), deadline_s + 10)
    assert failed.value.kind is ErrorKind.UNAVAILABLE and failed.value.code == "DEADLINE_EXCEEDED"
    assert "prefill hung" in failed.value.message and hung.probes >= 1 and peers.hangs.suspected("prefill")
    await asyncio.wait_for(hung.cancelled.wait(), 5)  # the call itself is cancelled, not left open
    assert peers.deadlines.outstanding_s["prefill"] == 0.0
    await peers.hangs.close()


async def test_a_busy_prefill_that_answers_its_health_is_waited_for_past_its_deadline():
    peers = _peers({})
    busy = _Prefill(answer_s=4 * peers.deadlines.prefill_s("prefill", 4), alive=True)
    peers.prefill = {"prefill": busy}
    reply = await asyncio.wait_for(
        peers.submit_prefill("prefill", pb.PrefillRequest(request_id="r1"), _job()), 30)
    assert reply.first_token == 7 and busy.probes >= 2 and not busy.cancelled.is_set()  # past two deadlines


async def test_a_hung_pool_is_passed_over_to_the_next_and_when_all_hang_no_prefill_is_reachable():
    first, second = _Prefill(answer_s=None, alive=False), _Prefill(answer_s=0.0, alive=True)
    peers = _peers({"prefill": first, "prefill-b": second}, "prefill-b")
    target = PrefillTarget(peers.plan.service("prefill"))
    reply = await asyncio.wait_for(prefill_any(peers, pb.PrefillRequest(request_id="r1"), _job(), target), 30)
    assert reply.first_token == 7 and target.name == "prefill-b" and target.passed_over == ["prefill"]
    assert target.degraded == "prefill-down"
    await peers.hangs.close()

    peers = _peers({"prefill": _Prefill(None, False), "prefill-b": _Prefill(None, False)}, "prefill-b")
    call = asyncio.ensure_future(prefill_any(peers, pb.PrefillRequest(request_id="r2"), _job(),
                                             PrefillTarget(peers.plan.service("prefill"))))
    with pytest.raises(RoleError):
        await asyncio.wait_for(asyncio.shield(call), 30)
    # the pipelines' test: the decode pool prefills it itself (services/router/pipelines.py prefill_here)
    assert no_prefill_reachable(call, call.exception())
    assert {s.name for s in peers.services(Role.PREFILL)} == {"prefill", "prefill-b"}
    await peers.hangs.close()


async def test_once_one_call_finds_a_pool_hung_every_open_call_fails_and_new_ones_until_it_answers_again():
    hung = _Prefill(answer_s=None, alive=False)
    peers = _peers({"prefill": hung})
    # The second call is sent while the first waits: its deadline counts the first's work, so it ends later.
    first = asyncio.ensure_future(peers.submit_prefill("prefill", pb.PrefillRequest(request_id="a"), _job()))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(peers.submit_prefill("prefill", pb.PrefillRequest(request_id="b"), _job()))
    done, _ = await asyncio.wait((first, second), timeout=60, return_when=asyncio.ALL_COMPLETED)
    assert len(done) == 2 and "no answer within its" in str(first.exception())
    assert "found hung by another call" in str(second.exception()) and peers.hangs.suspected("prefill")
    with pytest.raises(RoleError, match="Prefill not sent") as refused:
        await asyncio.wait_for(peers.submit_prefill("prefill", pb.PrefillRequest(request_id="c"), _job()), 1)
    assert refused.value.kind is ErrorKind.UNAVAILABLE and hung.calls == 2  # refused without a call

    hung.alive, hung.answer_s = True, 0.0  # it answers again: the watcher clears it, calls are made as usual
    await until(lambda: not peers.hangs.suspected("prefill"), "the watcher seeing the pool answer")
    reply = await asyncio.wait_for(peers.submit_prefill("prefill", pb.PrefillRequest(request_id="d"), _job()), 10)
    assert reply.first_token == 7 and hung.calls == 3
    await peers.hangs.close()


class _Lookup:
    """A decode pool's stub whose CacheLookup and Health answer only while `alive`."""

    def __init__(self) -> None:
        self.alive, self.lookups = False, 0

    async def CacheLookup(self, request, timeout=None, metadata=None):  # noqa: N802
        self.lookups += 1
        return await self.Health(request, timeout)

    async def Health(self, request, timeout=None, metadata=None):  # noqa: N802
        if not self.alive:
            await asyncio.sleep(timeout)
            raise grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       details="Deadline Exceeded")
        return pb.CacheLookupReply(hit_tokens=0)


async def test_a_lookup_past_its_deadline_has_the_pool_watched_and_passed_over_once_silent():
    decode = _Lookup()
    peers = _peers({})
    peers.decode = {"main-decode": decode}
    with pytest.raises(RoleError) as missed:
        await peers.cache_lookup("main-decode", _job())
    assert missed.value.kind is ErrorKind.DEADLINE and decode.lookups == 1
    await until(lambda: peers.hangs.suspected("main-decode"), "the watcher finding it silent")
    with pytest.raises(RoleError, match="CacheLookup not sent"):
        await asyncio.wait_for(peers.cache_lookup("main-decode", _job()), 1)
    assert decode.lookups == 1
    decode.alive = True
    await until(lambda: not peers.hangs.suspected("main-decode"), "the watcher seeing it answer")
    assert (await peers.cache_lookup("main-decode", _job())).hit_tokens == 0
    await peers.hangs.close()
