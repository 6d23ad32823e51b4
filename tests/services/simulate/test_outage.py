"""kill -9 and restart in the in-process mesh: the dead service's work stops, its peers see UNAVAILABLE,
and it comes back fresh."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from services.rpc import pb
from services.scenario.loader import load_scenario
from services.simulate.outage import OutageMesh
from services.simulate.wiring import simulated_plan
from tests.services.simulate.on_virtual_time import on_virtual_time

LONG_S = 10.0
DEADLINE_S = 5.0  # virtual seconds: what should fail at once fails long before


async def _drain(stream) -> None:
    async for _ in stream:  # the feed's opening message, then nothing until it breaks
        pass


def test_streams_break_calls_are_refused_and_the_restart_is_a_fresh_process():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            stub = mesh.stub("main-decode", "router")
            feed = stub.Tokens(pb.TokensRequest(subscriber="test"))
            reading = asyncio.ensure_future(_drain(feed))
            await asyncio.sleep(0.1)
            old_process, old_tasks = mesh.processes["main-decode"], set(mesh.tasks["main-decode"])
            assert old_tasks  # its engine loops and the stream's server task run for it
            mesh.kill("main-decode")
            with pytest.raises(grpc.aio.AioRpcError) as broken:
                async with asyncio.timeout(DEADLINE_S):
                    await reading
            assert broken.value.code() is grpc.StatusCode.UNAVAILABLE
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Health(pb.Empty())
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
            assert all(task.done() for task in old_tasks)
            await mesh.restart("main-decode")
            reply = await stub.Health(pb.Empty())
            assert reply.name == "main-decode" and reply.serving
            assert mesh.processes["main-decode"] is not old_process
            assert mesh.tasks["main-decode"].isdisjoint(old_tasks) and mesh.tasks["main-decode"]
            assert mesh.stub("relay-decode", "router") is not None and "main-decode" not in mesh.down

    on_virtual_time(main)


def test_a_call_in_flight_fails_when_its_server_dies_and_a_hang_up_stops_the_server():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            served = []

            async def slow_health(request, context):
                try:
                    await asyncio.sleep(LONG_S)
                finally:
                    served.append(asyncio.get_running_loop().time())
                return pb.HealthReply(serving=True)

            mesh.servicers["prefill"].Health = slow_health
            loop = asyncio.get_running_loop()
            start = loop.time()
            loop.call_later(1.0, mesh.kill, "prefill")
            with pytest.raises(grpc.aio.AioRpcError) as died:
                await mesh.stub("prefill", "router").Health(pb.Empty())
            assert died.value.code() is grpc.StatusCode.UNAVAILABLE
            assert loop.time() - start == pytest.approx(1.0)  # at the kill, not at the handler's end
            await mesh.restart("prefill")

            mesh.servicers["prefill"].Health = slow_health
            caller = asyncio.ensure_future(mesh.stub("prefill", "router").Health(pb.Empty()))
            await asyncio.sleep(1.0)
            caller.cancel()  # the client hangs up: the server's handler is cancelled with it
            await asyncio.gather(caller, return_exceptions=True)
            await asyncio.sleep(0)
            assert served[-1] - start == pytest.approx(2.0)

    on_virtual_time(main)


def test_a_dead_service_makes_no_more_calls():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            mesh.kill("main-decode")
            with pytest.raises(asyncio.CancelledError):
                await mesh.stub("relay-decode", "main-decode").Health(pb.Empty())
            await mesh.restart("main-decode")
            assert (await mesh.stub("relay-decode", "main-decode").Health(pb.Empty())).serving

    on_virtual_time(main)


def test_a_kill_resets_the_kv_connections_of_the_killed_service():
    async def main():
        async with OutageMesh(simulated_plan(load_scenario("pdd-mini"))) as mesh:
            wan = mesh.links["prefill-to-main-decode"]
            conn = wan.connect()
            sending = asyncio.ensure_future(conn.send("up", 50 * 2**20))  # seconds on the 10 Mbit/s real line
            await asyncio.sleep(0.1)
            mesh.kill("main-decode")
            with pytest.raises(ConnectionResetError):
                async with asyncio.timeout(DEADLINE_S):
                    await sending
            assert wan.stats()["up"]["resets"] >= 1

    on_virtual_time(main)
