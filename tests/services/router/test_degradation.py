"""The router's choices when a peer is missing or full, without a mesh."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from services.launcher.plan import build_plan
from services.router.api import ApiError
from services.router.relay_slot import RelaySlot, context_blocks, load_with_dispatches, relay_dispatches
from services.router.peers import Peers
from services.router.pipelines import Job, raise_pipeline_error
from services.router.placement import best_decode, best_prefill
from services.router.degraded import relay_retry, retried_on_relay
from services.router.prefill_target import PrefillTarget, no_prefill_reachable, prefill_any
from services.scenario import load_scenario
from services.rpc.errors import role_error
from services.types import ErrorKind, Role, RoleError
from services.rpc import pb
from services.scenario.sizing import instance_sizing


class _Lookup:
    def __init__(self, hit: int | None, load: float = 0.0) -> None:
        self.hit, self.load = hit, load

    async def CacheLookup(self, request, timeout, metadata):  # noqa: N802 (the gRPC method's name)
        if self.hit is None:
            raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       details="failed to connect to all addresses")
        return pb.CacheLookupReply(hit_tokens=self.hit, load=self.load, instance="decode-0")


def _peers(preset: str, overrides: tuple[str, ...] = (), **decode) -> Peers:
    peers = Peers.__new__(Peers)  # no channels: the stubs below stand in for them
    overrides = (*overrides, "pools.decode.count=1") if preset == "pd-cross-mini" else overrides
    peers.plan = build_plan(load_scenario(preset, list(overrides)))
    peers.decode = decode
    return peers


def _with_a_second_pool(preset: str, index: int, name: str) -> Peers:
    """Peers of `preset` plus a copy named `name` of its pool number `index`."""
    scenario = load_scenario(preset)
    pools = list(scenario.pools) + [scenario.pools[index].model_copy(update={"name": name})]
    peers = Peers.__new__(Peers)
    peers.plan = build_plan(scenario.model_copy(update={"pools": tuple(pools)}))
    return peers


def _two_decode_pools():
    return _with_a_second_pool("pd-cross-mini", 1, "decode-b")


async def test_a_decode_pool_that_does_not_answer_is_skipped():
    peers = _two_decode_pools()
    peers.decode = {"decode": _Lookup(None), "decode-b": _Lookup(12)}
    service, hit = await best_decode(peers, Job("r", [1, 2, 3], 4, 0, 0.0), (Role.DECODE,))
    assert (service.name, hit) == ("decode-b", 12)


async def test_when_no_decode_pool_answers_the_request_fails_with_503():
    peers = _peers("pd-cross-mini", decode=_Lookup(None))
    with pytest.raises(ApiError) as failure:
        await best_decode(peers, Job("r", [1, 2, 3], 4, 0, 0.0), (Role.DECODE,))
    assert failure.value.status == 503 and "cache lookup at decode failed" in failure.value.message


def test_the_relay_load_counts_requests_sent_its_way_before_it_sees_them():
    peers = _peers("pdd-mini")
    relay = peers.plan.service("relay-decode")
    capacity = relay.pool.count * instance_sizing(peers.plan.scenario, relay.pool).max_running
    assert load_with_dispatches(peers, relay, 0.1) == 0.1
    relay_dispatches(peers)[relay.name] += capacity  # a burst the relay has not admitted yet
    assert load_with_dispatches(peers, relay, 0.1) == 1.0  # saturated: the policy now routes P-MD
    assert load_with_dispatches(peers, relay, 1.5) == 1.5  # the relay's own figure wins when it is higher


def test_the_relay_load_counts_the_memory_of_long_contexts_on_their_way():
    # 64K-token contexts fill a relay's KV long before its running cap: at 46 KB of KV a token the
    # paper-scale relay holds 18 of them, and bursts of 53 sent its way queued 21 there (docs/pdd.md).
    peers = _peers("paper-full-pdd", ("model=pdd-paper-kv46k",))
    relay = peers.plan.service("relay-decode")
    sizing = instance_sizing(peers.plan.scenario, relay.pool)
    job = Job("r", [1] * 65536, 256, 0, 0.0)
    blocks = context_blocks(peers, len(job.prompt), job.max_tokens)
    assert blocks == (65536 + 256) // 16
    fits = relay.pool.count * sizing.kv_capacity_blocks // blocks
    slots = [RelaySlot(peers, relay.name, job) for _ in range(fits)]
    assert len(slots) < relay.pool.count * sizing.max_running * 0.01  # by sequences, the relay looks idle
    assert load_with_dispatches(peers, relay, 0.0) > peers.plan.scenario.pdd.relay_max_load
    for slot in slots:
        slot.release()
        slot.release()  # a second release gives nothing back twice
    assert load_with_dispatches(peers, relay, 0.0) == 0.0
    assert relay_dispatches(peers)[relay.name] == 0


def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def _failed(code: grpc.StatusCode, details: str) -> RoleError:
    """A peer's failed call as the Peers adapter hands it to the pipelines."""
    return role_error(_rpc_error(code, details))


async def test_a_failed_prefill_is_named_before_the_decoders_error():
    prefill = asyncio.get_running_loop().create_future()
    prefill.set_exception(_failed(grpc.StatusCode.UNAVAILABLE, "prefill went away"))
    with pytest.raises(ApiError) as failure:
        raise_pipeline_error(_failed(grpc.StatusCode.DEADLINE_EXCEEDED, "no KV"), prefill, "decode")
    assert failure.value.status == 503 and failure.value.message == "prefill failed: prefill went away"


async def test_the_decoders_error_when_prefill_is_fine_and_a_cancellation_stays_one():
    prefill = asyncio.get_running_loop().create_future()
    with pytest.raises(ApiError) as failure:
        raise_pipeline_error(_failed(grpc.StatusCode.DEADLINE_EXCEEDED, "no KV"), prefill, "relay decode")
    assert failure.value.status == 504 and failure.value.message == "relay decode failed: no KV"
    prefill.set_result(None)
    with pytest.raises(asyncio.CancelledError):
        raise_pipeline_error(asyncio.CancelledError(), prefill, "decode")


class _Prefill:
    def __init__(self, answer: str | None) -> None:
        self.answer, self.calls = answer, 0

    async def Prefill(self, request, timeout, metadata):  # noqa: N802 (the gRPC method's name)
        self.calls += 1
        if self.answer is None:
            raise _rpc_error(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")
        return self.answer


def _two_prefill_pools() -> Peers:
    return _with_a_second_pool("pdd-mini", 0, "prefill-b")


async def test_a_prefill_pool_that_is_down_passes_its_request_to_the_next():
    peers = _two_prefill_pools()
    peers.prefill = {"prefill": _Prefill(None), "prefill-b": _Prefill("reply from b")}
    target = PrefillTarget(peers.plan.service("prefill"))
    assert await prefill_any(peers, pb.PrefillRequest(), Job("r", [1, 2], 4, 0, 0.0), target) == "reply from b"
    assert target.name == "prefill-b" and target.passed_over == ["prefill"] and target.degraded == "prefill-down"


async def test_when_every_prefill_pool_is_down_the_request_fails_with_503():
    peers = _two_prefill_pools()
    peers.prefill = {"prefill": _Prefill(None), "prefill-b": _Prefill(None)}
    target = PrefillTarget(peers.plan.service("prefill-b"))
    with pytest.raises(RoleError) as failure:
        await prefill_any(peers, pb.PrefillRequest(), Job("r", [1, 2], 4, 0, 0.0), target)
    assert failure.value.kind is ErrorKind.UNAVAILABLE
    assert peers.prefill["prefill"].calls == peers.prefill["prefill-b"].calls == 1


async def test_only_a_prefill_no_pool_answered_lets_the_decode_pool_prefill_itself():
    loop = asyncio.get_running_loop()

    def failed(code: grpc.StatusCode) -> asyncio.Future:
        call = loop.create_future()
        call.set_exception(_failed(code, "x"))
        return call

    unreachable = failed(grpc.StatusCode.UNAVAILABLE)
    assert no_prefill_reachable(unreachable, _failed(grpc.StatusCode.CANCELLED, "cancelled by prefill"))
    for refused in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT,
                    grpc.StatusCode.FAILED_PRECONDITION):  # prefill's own answers are the request's
        assert not no_prefill_reachable(failed(refused), asyncio.CancelledError())
    running = loop.create_future()  # the decoder failed while prefill still works
    assert not no_prefill_reachable(running, _failed(grpc.StatusCode.UNAVAILABLE, "decode went away"))
    running.cancel()


async def test_a_cancelled_request_is_never_retried_without_prefill():
    unreachable = asyncio.get_running_loop().create_future()
    unreachable.set_exception(_failed(grpc.StatusCode.UNAVAILABLE, "x"))

    waiting = asyncio.Event()

    async def the_request() -> bool:
        try:
            waiting.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:  # the client left (or the deadline): still a cancellation
            return no_prefill_reachable(unreachable, exc)

    task = asyncio.ensure_future(the_request())
    await waiting.wait()
    task.cancel()
    assert await task is False


def test_a_p_md_failure_before_token_0_goes_to_the_relay_under_its_own_id():
    assert retried_on_relay(ApiError(503, "decode failed: KV transfer failed"))
    assert retried_on_relay(ApiError(502, "token feed from main-decode broke"))
    assert not any(retried_on_relay(ApiError(status, "x")) for status in (400, 429, 504))
    job = Job("r7", [1, 2, 3], 4, 9, 1.5)
    retry = relay_retry(job)
    assert retry.request_id == "r7/relay" and retry.prompt is job.prompt and retry.timeline is job.timeline
    assert (retry.max_tokens, retry.seed, retry.received_unix) == (4, 9, 1.5)


async def test_a_prefill_gone_once_the_relay_finished_fails_nothing_and_names_no_other_stage():
    from services.router.pdd import _stop_wan_transfer

    class _Gone:
        async def CancelTransfer(self, request, timeout, metadata):  # noqa: N802
            raise _rpc_error(grpc.StatusCode.UNAVAILABLE, "ipv4:127.0.0.1:1234: Connection refused")

    peers = _peers("pdd-mini")
    peers.prefill = {"prefill": _Gone()}
    # Before, this error escaped as "relay decode failed: ipv4:...", the prefill's address under the relay's name.
    assert await _stop_wan_transfer(peers, PrefillTarget(peers.plan.service("prefill")), Job("r", [1], 1, 0, 0.0)) \
        is False


async def test_the_prefill_pool_holding_the_longest_prefix_takes_the_request():
    peers = _with_a_second_pool("pd-intra-mini", 0, "prefill-b")
    default = peers.services(Role.PREFILL)[0]
    peers.prefill = {"prefill": _Lookup(0, load=0.0), "prefill-b": _Lookup(512, load=0.3)}
    chosen = await best_prefill(peers, Job("r", [1, 2, 3], 4, 0, 0.0), default)
    assert chosen.name == "prefill-b"
    peers.prefill = {"prefill": _Lookup(None), "prefill-b": _Lookup(None)}  # none answers: the default
    assert await best_prefill(peers, Job("r", [1, 2, 3], 4, 0, 0.0), default) is default
