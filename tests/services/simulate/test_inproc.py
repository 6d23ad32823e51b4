"""One P-RLD-MD request through the in-process mesh, with no socket at all, against the same request on the mesh."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from services.router.api import CompletionRequest
from services.router.fanout import plan_jobs
from services.router.pipelines import Token
from services.scenario.loader import load_scenario
from services.simulate.clock import VirtualClock, process_clocks, virtual_runner
from services.simulate.inproc import InprocStub
from services.simulate.wiring import SimulatedMesh, simulated_plan
from tests.integration.mesh import running_mesh
from tests.integration.test_mesh_modes import _stream
from tests.integration.test_pdd import LOW_HIT, MODEL
from tests.tolerance import assert_close

OUTPUT = 700
DURATIONS = ("kv_transfer_s", "queued_s")  # measured spans: the mesh's carry its own overhead
WALL_STAMPS = ("timeline",)
# Where the relay hands off depends on when the WAN transfer lands against the relay's steps, which
# the mesh's own overhead shifts (3 tokens on a quiet machine, 24 with the machine's event-loop lag
# p99 near 20 ms); their sum is exact. 5% of the output is about 0.25 s of relay steps, inside the
# 20% allowed on the 3 s transfer that decides the cut.
CUT_COUNTS = ("rld_tokens", "md_tokens")
CUT_TOKENS = 0.05 * OUTPUT


def _refuse(*args, **kwargs):
    raise AssertionError("the in-process mesh opened a socket or a gRPC channel")


async def _inproc_stream(prompt: list[int], max_tokens: int) -> tuple[str, dict]:
    async with SimulatedMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
        router = mesh.router
        body = CompletionRequest.model_validate({"model": MODEL, "prompt": prompt, "max_tokens": max_tokens,
                                                 "stream": True}, context={"vocab_size": router.model.vocab_size})
        job, choice = plan_jobs(router, "inproc-1", body, False)[0]
        texts, pdd = [], None
        async for item in router.run(job):
            if type(item) is Token:
                texts.append(choice.add(item.token_id))
            else:
                pdd = item.pdd
        return "".join(texts), pdd


def simulated(prompt: list[int], max_tokens: int, monkeypatch) -> tuple[str, dict]:
    with virtual_runner() as runner:  # the loop's own self-pipe is made before sockets are refused
        monkeypatch.setattr(socket, "socket", _refuse)
        monkeypatch.setattr(socket, "create_connection", _refuse)
        monkeypatch.setattr(grpc.aio, "insecure_channel", _refuse)
        monkeypatch.setattr(grpc.aio, "server", _refuse)
        try:
            with process_clocks(VirtualClock(runner.get_loop())):
                return runner.run(_inproc_stream(prompt, max_tokens))
        finally:
            monkeypatch.undo()


def test_refusing_sockets_is_in_force(monkeypatch):
    monkeypatch.setattr(socket, "socket", _refuse)
    with pytest.raises(AssertionError, match="opened a socket"):
        socket.socket()


def test_in_process_request_relays_and_hands_off_without_sockets(monkeypatch):
    text, pdd = simulated(LOW_HIT, OUTPUT, monkeypatch)
    assert pdd["pipeline"] == "P-RLD-MD" and not pdd["singular"]
    assert pdd["rld_tokens"] > 0 and pdd["rld_tokens"] + pdd["md_tokens"] == OUTPUT
    assert pdd["handoff"]["cut"] == pdd["rld_tokens"]
    assert len(text.split()) == OUTPUT


@pytest.mark.integration
def test_in_process_request_matches_the_mesh(tmp_path, monkeypatch):
    with running_mesh("pdd-mini", tmp_path) as url:
        mesh_text, mesh_pdd = _stream(url, LOW_HIT, OUTPUT)
    text, pdd = simulated(LOW_HIT, OUTPUT, monkeypatch)
    assert text == mesh_text
    assert set(pdd) == set(mesh_pdd)
    assert pdd["rld_tokens"] + pdd["md_tokens"] == mesh_pdd["rld_tokens"] + mesh_pdd["md_tokens"] == OUTPUT
    for key, value in mesh_pdd.items():
        if key in WALL_STAMPS:
            assert set(pdd[key]) == set(value), key
        elif key in CUT_COUNTS:
            assert_close(pdd[key], value, rel=0.0, abs_=CUT_TOKENS, what=key)
        elif key in DURATIONS:
            assert_close(pdd[key], value, rel=0.2, abs_=0.05, what=key)
        elif key == "handoff":
            assert pdd[key]["mode"] == value["mode"]
            assert_close(pdd[key]["cut"], value["cut"], rel=0.0, abs_=CUT_TOKENS, what="handoff cut")
        elif key == "policy":
            assert pdd[key]["reason"] == value["reason"]
            assert_close(pdd[key]["estimate_s"], value["estimate_s"], rel=0.2, abs_=0.05, what="policy estimate")
        else:
            assert pdd[key] == value, key


class _Servicer:
    """A servicer's shapes: a unary call that answers, aborts, stalls or breaks; a stream."""

    async def Answer(self, request, context):
        return {"request": request, "metadata": dict(context.invocation_metadata()), "peer": context.peer()}

    async def Refuse(self, request, context):
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "full")

    async def Stall(self, request, context):
        await asyncio.sleep(60)

    async def Break(self, request, context):
        raise KeyError("a defect")

    async def Generate(self, request, context):
        for i in range(request):
            yield i
            await asyncio.sleep(1)
        await context.abort(grpc.StatusCode.UNAVAILABLE, "gone")


def _on_virtual_time(coro_fn):
    with virtual_runner() as runner:
        return runner.run(coro_fn())


def test_unary_calls_answer_and_fail_as_grpc_clients_see_it():
    async def body():
        stub = InprocStub(_Servicer(), "router")
        reply = await stub.Answer(7, timeout=1.0, metadata=(("x-request-id", "r1"),))
        assert reply == {"request": 7, "metadata": {"x-request-id": "r1"}, "peer": "inproc:router"}
        codes = []
        for method in (stub.Refuse, stub.Stall, stub.Break):
            with pytest.raises(grpc.aio.AioRpcError) as failure:
                await method(0, timeout=5.0)
            codes.append((failure.value.code(), failure.value.details()))
        return codes, asyncio.get_running_loop().time()

    codes, now = _on_virtual_time(body)
    assert codes[0] == (grpc.StatusCode.RESOURCE_EXHAUSTED, "full")
    assert codes[1][0] is grpc.StatusCode.DEADLINE_EXCEEDED and now == 5.0  # the deadline, not the 60 s stall
    assert codes[2][0] is grpc.StatusCode.UNKNOWN and "a defect" in codes[2][1]


def test_a_stubs_call_is_built_once_and_answers_every_time():
    async def body():
        stub = InprocStub(_Servicer(), "router")
        first = stub.Answer
        return first is stub.Answer, [(await stub.Answer(n, timeout=1.0))["request"] for n in range(3)]

    assert _on_virtual_time(body) == (True, [0, 1, 2])


def test_a_stream_runs_from_the_call_and_ends_with_its_status():
    async def body():
        stub = InprocStub(_Servicer())
        call = stub.Generate(3)
        await asyncio.sleep(10)  # the handler ran without a reader, as a server's does
        got = []
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            async for event in call:
                got.append(event)
        return got, failure.value.code()

    assert _on_virtual_time(body) == ([0, 1, 2], grpc.StatusCode.UNAVAILABLE)


def test_a_cancelled_stream_raises_cancelled_error_even_before_it_started():
    async def body():
        stub = InprocStub(_Servicer())
        early, late = stub.Generate(5), stub.Generate(5)
        assert early.cancel()  # its handler has not run a line yet
        await asyncio.sleep(1.5)
        assert late.cancel() and not late.cancel()
        outcomes = []
        for call in (early, late):
            got = []
            with pytest.raises(asyncio.CancelledError):
                async for event in call:
                    got.append(event)
            outcomes.append(got)
        return outcomes

    assert _on_virtual_time(body) == [[], [0, 1]]
