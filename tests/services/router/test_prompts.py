"""The router sends a service the prompt's ids once: by reference after its lookup, whole again only when refused."""

from __future__ import annotations

import grpc
import pytest

from services.launcher.plan import build_plan
from services.router.peers import Peers
from services.router.pipelines import Job
from services.router.prefill_target import PrefillTarget, prefill_any
from services.router.prompts import Resends, looked_up, prompt_fields
from services.router.resend import ResendingDecodeStub
from services.rpc import pb
from services.rpc.prompts import NOT_HELD
from services.scenario import load_scenario
from services.types import ErrorKind, Role, RoleError


def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def _not_held() -> grpc.aio.AioRpcError:
    return _rpc_error(grpc.StatusCode.FAILED_PRECONDITION, f"{NOT_HELD}: r (none under that id; send its ids)")


def test_a_looked_up_service_gets_a_reference_once_and_any_other_the_ids():
    job = Job("r", [1, 2, 3], 4, 0, 0.0)
    looked_up(job, "main-decode")
    held = prompt_fields(job, "main-decode")["held_prompt"]
    assert (held.request_id, held.length, held.fingerprint) == ("r", 3, job.fingerprint)
    again = prompt_fields(job, "main-decode")  # a second call there (a degraded retry) sends the ids
    assert again == {"prompt_ids": job.prompt.packed, "prompt_fingerprint": job.fingerprint}
    assert prompt_fields(job, "relay-decode") == again


class _Prefill:
    """Answers each Prefill with the next of `answers` (an exception is raised), recording what it got."""

    def __init__(self, *answers) -> None:
        self.answers, self.requests = list(answers), []

    async def Prefill(self, request, timeout, metadata):  # noqa: N802 (the gRPC method's name)
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def _two_prefill_pools() -> Peers:
    scenario = load_scenario("pdd-mini")
    pools = list(scenario.pools) + [scenario.pools[0].model_copy(update={"name": "prefill-b"})]
    peers = Peers.__new__(Peers)
    peers.plan = build_plan(scenario.model_copy(update={"pools": tuple(pools)}))
    peers.resends = Resends()
    return peers


async def test_a_prefill_pool_that_lost_the_prompt_gets_its_ids_once_more():
    peers = _two_prefill_pools()
    down = _rpc_error(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")
    peers.prefill = {"prefill": _Prefill(down), "prefill-b": _Prefill(_not_held(), "reply")}
    job = Job("r", [1, 2, 3], 4, 0, 0.0)
    looked_up(job, "prefill")
    looked_up(job, "prefill-b")
    target = PrefillTarget(peers.plan.service("prefill"))
    assert await prefill_any(peers, pb.PrefillRequest(request_id="r", kv_target="main-decode"), job, target) == "reply"
    first, = peers.prefill["prefill"].requests
    named, whole = peers.prefill["prefill-b"].requests
    assert first.HasField("held_prompt") and named.HasField("held_prompt") and not named.prompt_ids
    assert not whole.HasField("held_prompt") and whole.prompt_ids == job.prompt.packed
    assert whole.kv_target == "main-decode" and peers.resends.by_service == {"prefill-b": 1}


async def test_a_prefill_refusal_of_another_kind_is_not_resent():
    peers = _two_prefill_pools()
    refused = _rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "main-decode refused the transfer: draining")
    peers.prefill = {"prefill": _Prefill(refused)}
    job = Job("r", [1, 2, 3], 4, 0, 0.0)
    looked_up(job, "prefill")
    with pytest.raises(RoleError, match="draining") as failure:
        await prefill_any(peers, pb.PrefillRequest(request_id="r"), job, PrefillTarget(peers.plan.service("prefill")))
    assert failure.value.kind is ErrorKind.PRECONDITION and failure.value.code == "FAILED_PRECONDITION"
    assert len(peers.prefill["prefill"].requests) == 1 and peers.resends.by_service == {}


class _Call:
    def __init__(self, events) -> None:
        self.events, self.cancelled = events, False

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    async def _run(self):
        for event in self.events:
            if isinstance(event, BaseException):
                raise event
            yield event

    def __aiter__(self):
        return self._run()


class _Decode:
    def __init__(self, *calls: list) -> None:
        self.calls, self.requests = list(calls), []

    def Generate(self, request, metadata=None):  # noqa: N802 (the gRPC method's name)
        self.requests.append(request)
        return _Call(self.calls.pop(0))


async def test_a_generate_refused_for_its_reference_is_made_again_with_the_ids_and_streams_from_there():
    job = Job("r", [1, 2, 3], 4, 0, 0.0)
    decode, resends = _Decode([_not_held()], ["token 0", "stats"]), Resends()
    stub = ResendingDecodeStub(decode, job, "main-decode", resends)
    looked_up(job, "main-decode")
    call = stub.Generate(pb.GenerateRequest(request_id="r", max_tokens=4, **prompt_fields(job, "main-decode")))
    assert [event async for event in call] == ["token 0", "stats"]
    named, whole = decode.requests
    assert named.HasField("held_prompt") and whole.prompt_ids == job.prompt.packed and whole.max_tokens == 4
    assert resends.by_service == {"main-decode": 1}


class _Replies:
    """GenerateFed calls answered in turn: a reply, or an error raised by awaiting the call."""

    def __init__(self, *answers) -> None:
        self.answers, self.requests = list(answers), []

    def GenerateFed(self, request, metadata=None):  # noqa: N802
        self.requests.append(request)
        answer = self.answers.pop(0)

        async def call():
            if isinstance(answer, BaseException):
                raise answer
            return answer
        return _Awaited(call())


class _Awaited:
    def __init__(self, coro) -> None:
        self.coro = coro

    def __await__(self):
        return self.coro.__await__()

    def cancel(self) -> bool:
        self.coro.close()
        return True


async def test_a_fed_generate_refused_for_its_reference_is_made_again_with_the_ids():
    job = Job("r", [1, 2, 3], 4, 0, 0.0)
    decode, resends = _Replies(_not_held(), "stats"), Resends()
    stub = ResendingDecodeStub(decode, job, "main-decode", resends)
    looked_up(job, "main-decode")
    assert await stub.GenerateFed(pb.GenerateRequest(request_id="r", **prompt_fields(job, "main-decode"))) == "stats"
    named, whole = decode.requests
    assert named.HasField("held_prompt") and whole.prompt_ids == job.prompt.packed
    assert resends.by_service == {"main-decode": 1}
    busy = _Replies(_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "engine full"))
    with pytest.raises(grpc.aio.AioRpcError, match="engine full"):  # any other failure is the caller's
        await ResendingDecodeStub(busy, job, "main-decode", resends).GenerateFed(pb.GenerateRequest(request_id="r"))
    assert len(busy.requests) == 1 and resends.by_service == {"main-decode": 1}


async def test_a_generate_that_fails_otherwise_or_was_cancelled_is_not_made_again():
    job = Job("r", [1, 2, 3], 4, 0, 0.0)
    busy = _rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "engine full")
    decode = _Decode([busy], [_not_held()])
    stub = ResendingDecodeStub(decode, job, "main-decode", Resends())
    with pytest.raises(grpc.aio.AioRpcError, match="engine full"):
        [event async for event in stub.Generate(pb.GenerateRequest(request_id="r"))]
    call = stub.Generate(pb.GenerateRequest(request_id="r"))
    call.cancel()  # the request ended: its refusal is not worth a second call
    with pytest.raises(grpc.aio.AioRpcError, match=NOT_HELD):
        [event async for event in call]
    assert len(decode.requests) == 2


async def test_over_real_grpc_a_lost_prompt_is_refused_and_the_resent_ids_are_served():
    from services.instances import RoleProcess
    from services.main_decode.server import DecodeService
    from services.rpc import channel, pb_grpc, server as grpc_server
    from services.credentials import new_token
    from services.rpc.auth import TokenCheck

    plan = build_plan(load_scenario("colocated-mini"))
    process = RoleProcess(plan, plan.with_role(Role.COLOCATED)[0])
    servicer = DecodeService(process)
    token = new_token()
    server = grpc_server(TokenCheck(token, process.registry))
    pb_grpc.add_DecodeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    for engine in process.engines:
        await engine.start()
    ch = channel(f"127.0.0.1:{port}", token)
    try:
        job, resends = Job("r", list(range(100, 164)), 3, 0, 0.0), Resends()
        stub = ResendingDecodeStub(pb_grpc.DecodeStub(ch), job, process.service.name, resends)
        looked_up(job, process.service.name)  # as if its lookup had answered, though nothing was held
        request = pb.GenerateRequest(request_id="r", max_tokens=3, **prompt_fields(job, process.service.name))
        events = [event async for event in stub.Generate(request)]
        assert [e.token.position for e in events if e.HasField("token")] == [0, 1, 2]
        assert resends.by_service == {process.service.name: 1} and process.held.refused == 1
        assert process.stats()["prompts"]["hashed"] == 1
    finally:
        await ch.close()
        await server.stop(None)
        for engine in process.engines:
            await engine.stop()
