"""A decode service: its cache lookup and admission pick the instance by one rule; GenerateFed over real gRPC."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from services.engine.sequence import Sequence
from services.launcher.plan import build_plan
from services.main_decode.server import DecodeService
from services.rpc import pb
from services.rpc.ids import pack_ids
from services.scenario import load_scenario
from tests.services.engine.conftest import prompt

DEADLINE_S = 10.0



def _service() -> DecodeService:
    from services.instances import RoleProcess

    plan = build_plan(load_scenario("pd-intra-mini", ()))
    return DecodeService(RoleProcess(plan, plan.service("decode")))  # two instances


def _cache(engine, ids: list[int], hashes: list[int]) -> None:
    blocks = len(ids) // engine.block_size
    assert engine.cache.admit("warm", hashes, blocks) is not None
    engine.cache.commit("warm", hashes, blocks)
    engine.cache.release("warm")


def _busy(engine) -> None:
    """Forty waiting requests: far past the pool's balance thresholds (16 sequences and 1.5x)."""
    for i in range(40):
        engine.submit(Sequence(f"busy{i}", prompt(64, salt=i + 1), prompt_len=64, kv_tokens=0, generate=1,
                               first_position=0, seed=0))


async def _looked_up(length: int, busy_holder: bool):
    """A two-instance decode service whose first instance caches a prompt; the lookup's reply for it."""
    service = _service()
    process = service.process
    packed = pack_ids(prompt(length))
    hashes = process.prompt(pb.CacheLookupRequest(prompt_ids=packed)).hashes
    _cache(process.engines[0], prompt(length), hashes)
    if busy_holder:
        _busy(process.engines[0])
    reply = await service.CacheLookup(pb.CacheLookupRequest(request_id="r", prompt_ids=packed), context=None)
    return process, hashes, reply


async def test_the_lookup_names_the_instance_admission_takes_and_what_that_instance_holds():
    # the prefix holder is far busier than the other: the pool's rule balances away from it
    process, hashes, reply = await _looked_up(4096, busy_holder=True)
    holder, idle = process.engines
    admitted = process.instance("", hashes)
    assert reply.instance == admitted.name == idle.name
    assert reply.hit_tokens == admitted.cached_prefix_tokens(hashes) == 0  # a transfer sized on idle's cache
    assert process.instance(reply.instance, hashes) is idle


async def test_generate_is_admitted_on_the_instance_the_lookup_named_even_when_loads_have_moved():
    process, hashes, reply = await _looked_up(2048, busy_holder=False)
    first, second = process.engines
    assert reply.instance == first.name and reply.hit_tokens == 2048
    _busy(first)  # between lookup and generate the named instance got busy
    assert process.instance("", hashes) is second  # the rule alone would now go elsewhere
    assert process.instance(reply.instance, hashes) is first  # the named instance, whose cache sized the transfer


class _Methods(grpc.aio.ServerInterceptor):
    """The methods the server was called with, in order."""

    def __init__(self) -> None:
        self.called: list[str] = []

    async def intercept_service(self, continuation, handler_call_details):
        self.called.append(handler_call_details.method.rsplit("/", 1)[1])
        return await continuation(handler_call_details)


async def test_over_real_grpc_a_fed_generate_is_one_unary_call_whose_tokens_come_through_the_feed():
    from services.instances import RoleProcess
    from services.router.decode_stream import DecodeStream
    from services.router.feed import SUBSCRIBER, TokenFeed, tcp_feed
    from services.rpc import channel, metadata, pb_grpc
    from services.types import Role

    plan = build_plan(load_scenario("colocated-mini"))
    process = RoleProcess(plan, plan.with_role(Role.COLOCATED)[0])
    servicer, methods = DecodeService(process), _Methods()
    servicer.feed_server.host, servicer.feed_server.port = "127.0.0.1", 0
    server = grpc.aio.server(interceptors=[methods])
    pb_grpc.add_DecodeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await servicer.feed_server.start()
    for engine in process.engines:
        await engine.start()
    ch, feed = channel(f"127.0.0.1:{port}"), None
    try:
        stub, opened = pb_grpc.DecodeStub(ch), asyncio.Event()
        feed = TokenFeed(tcp_feed(f"127.0.0.1:{servicer.feed_server.port}"), process.service.name)
        deliver = feed.deliver
        feed.deliver = lambda *step: (deliver(*step), opened.set())  # the feed's opening step sets it open
        feed.start()
        await asyncio.wait_for(opened.wait(), DEADLINE_S)

        async def tokens_and_stats(rid: str, fed_unary: bool):
            request = pb.GenerateRequest(request_id=rid, prompt_ids=pack_ids(prompt(64)), max_tokens=5, seed=3)
            items = [item async for item in DecodeStream(stub, request, feed, fed_unary=fed_unary)]
            return [item[:2] for item in items[:-1]], items[-1]  # a mesh's reader: token by token

        fed, fed_stats = await asyncio.wait_for(tokens_and_stats("fed", True), DEADLINE_S)
        streamed, _ = await asyncio.wait_for(tokens_and_stats("streamed", False), DEADLINE_S)
        assert methods.called == ["GenerateFed", "Generate"]
        assert [p for p, _ in fed] == [0, 1, 2, 3, 4] and fed == streamed  # the same tokens either way
        assert fed_stats.end_position == 5 and fed_stats.instance
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # a call naming a feed not open here
            await stub.GenerateFed(pb.GenerateRequest(request_id="x", prompt_ids=pack_ids(prompt(64)), max_tokens=2),
                                   metadata=metadata("x", "nobody"), timeout=DEADLINE_S)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE and SUBSCRIBER != "nobody"
        assert "no token feed" in refused.value.details()
    finally:
        if feed is not None:
            await feed.close()
        await ch.close()
        await server.stop(None)
        await servicer.feed_server.close()
        for engine in process.engines:
            await engine.stop()
