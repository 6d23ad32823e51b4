"""The one mapping between role errors and gRPC status codes, both ways."""

from __future__ import annotations

import grpc
import pytest

from services.rpc.errors import STATUS, answer, role_error
from services.types import ErrorKind, RoleError


class AbortingContext:
    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def _rpc_error(code: grpc.StatusCode, details: str = "") -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def test_every_kind_has_its_own_status_and_comes_back_as_itself():
    assert set(STATUS) == set(ErrorKind) and len(set(STATUS.values())) == len(ErrorKind)
    for kind, code in STATUS.items():
        back = role_error(_rpc_error(code, "why"))
        assert back.kind is kind and back.message == "why" and back.code == code.name


def test_a_status_without_a_kind_fails_named_by_its_code():
    back = role_error(_rpc_error(grpc.StatusCode.INTERNAL))
    assert back.kind is ErrorKind.FAILED and back.message == "INTERNAL" and back.code == "INTERNAL"


async def test_answer_aborts_with_the_status_of_the_cores_error():
    async def refused():
        raise RoleError(ErrorKind.EXHAUSTED, "no room")

    async def served():
        return "reply"

    with pytest.raises(grpc.aio.AioRpcError) as aborted:
        await answer(AbortingContext(), refused())
    assert aborted.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and aborted.value.details() == "no room"
    assert await answer(AbortingContext(), served()) == "reply"
