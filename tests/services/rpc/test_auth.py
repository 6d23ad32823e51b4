"""The deployment token over real gRPC: calls without it or with another are refused before any servicer runs."""

from __future__ import annotations

import os
import stat

import grpc
import pytest
from prometheus_client import CollectorRegistry

from services.rpc import channel, pb, pb_grpc, server
from services.credentials import MissingToken, new_token, write_token
from services.rpc.auth import TOKEN_ENV, TOKEN_FILE_ENV, TokenCheck, deployment_token, required_token

TOKEN = new_token()


class _Counting(pb_grpc.DecodeServicer):
    def __init__(self) -> None:
        self.drains = 0

    async def Drain(self, request, context):
        self.drains += 1
        return pb.Empty()

    async def Tokens(self, request, context):
        yield pb.StepTokens()


@pytest.fixture
async def guarded():
    registry, servicer = CollectorRegistry(), _Counting()
    srv = server(TokenCheck(TOKEN, registry))
    pb_grpc.add_DecodeServicer_to_server(servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    yield f"127.0.0.1:{port}", servicer, registry
    await srv.stop(None)


def _refused(registry: CollectorRegistry, method: str) -> float:
    return registry.get_sample_value("pdd_rpc_unauthenticated_total", {"method": f"/pdd.v1.Decode/{method}"}) or 0.0


@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN[:-1], TOKEN + "0"])
async def test_a_call_without_the_token_is_refused_counted_and_never_reaches_the_servicer(guarded, token, monkeypatch):
    address, servicer, registry = guarded
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
    async with channel(address, token) as ch:
        stub = pb_grpc.DecodeStub(ch)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Drain(pb.Empty(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "deployment token" in refused.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            async for _ in stub.Tokens(pb.TokensRequest(), timeout=5):
                pass
        assert streamed.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert servicer.drains == 0
    assert _refused(registry, "Drain") == 1 and _refused(registry, "Tokens") == 1


async def test_the_token_from_the_environment_is_sent_on_every_call(guarded, monkeypatch):
    address, servicer, registry = guarded
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    async with channel(address) as ch:
        stub = pb_grpc.DecodeStub(ch)
        await stub.Drain(pb.Empty(), timeout=5)
        assert [m async for m in stub.Tokens(pb.TokensRequest(), timeout=5)] == [pb.StepTokens()]
    assert servicer.drains == 1 and _refused(registry, "Drain") == 0


def test_the_token_file_wins_is_owner_only_and_must_not_be_empty(tmp_path):
    path = tmp_path / "secrets" / "mesh-token"
    write_token(path, TOKEN)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert deployment_token({TOKEN_FILE_ENV: str(path), TOKEN_ENV: "other"}) == TOKEN
    assert deployment_token({TOKEN_ENV: "other"}) == "other"
    assert deployment_token({}) is None
    path.write_text("")
    with pytest.raises(MissingToken, match="empty"):
        deployment_token({TOKEN_FILE_ENV: str(path)})
    with pytest.raises(MissingToken, match="cannot be read"):
        deployment_token({TOKEN_FILE_ENV: str(tmp_path / "absent")})
    with pytest.raises(MissingToken, match=TOKEN_ENV):
        required_token({})


async def test_calls_to_made_up_methods_share_one_label(guarded):
    address, servicer, registry = guarded
    async with grpc.aio.insecure_channel(address) as ch:
        for i in range(20):
            call = ch.unary_unary(f"/pdd.v1.Decode/MadeUp{i}")
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(b"", timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert registry.get_sample_value("pdd_rpc_unauthenticated_total", {"method": "unknown"}) == 20
    assert len([s for m in registry.collect() for s in m.samples if s.name == "pdd_rpc_unauthenticated_total"]) == 1
