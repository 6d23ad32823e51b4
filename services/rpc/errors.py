"""The one mapping between the roles' errors (services/types.py RoleError) and gRPC status codes.

A servicer (the adapter of a role core) aborts its call with the status of the core's RoleError;
a stub's adapter turns a call's AioRpcError back into a RoleError, so a core never sees gRPC.
"""

from __future__ import annotations

from typing import Any, Awaitable, TypeVar

import grpc

from services.rpc import metadata
from services.types import ErrorKind, RoleError

T = TypeVar("T")

STATUS = {
    ErrorKind.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.DEADLINE: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorKind.CANCELLED: grpc.StatusCode.CANCELLED,
    ErrorKind.FAILED: grpc.StatusCode.UNKNOWN,
}
_KIND = {code: kind for kind, code in STATUS.items()}


async def abort(context: grpc.aio.ServicerContext, exc: RoleError) -> None:
    """End the call with the status of `exc` (raises, as context.abort does)."""
    await context.abort(STATUS[exc.kind], exc.message)


async def answer(context: grpc.aio.ServicerContext, call: Awaitable[T]) -> T:
    """A unary call's reply: what the core's `call` returns, or the call aborted with its RoleError's status."""
    try:
        return await call
    except RoleError as exc:
        await abort(context, exc)
        raise  # not reached: abort raises


async def unary(method, request, request_id: str, timeout_s: float) -> Any:
    """One unary call of a peer's stub, under the request's id; its failure as the RoleError of its status."""
    try:
        return await method(request, timeout=timeout_s, metadata=metadata(request_id))
    except grpc.aio.AioRpcError as exc:
        raise role_error(exc) from exc


def role_error(exc: grpc.aio.AioRpcError) -> RoleError:
    """A peer's failed call as the calling core sees it, naming its status; a status with no kind of its own
    (INTERNAL, UNIMPLEMENTED...) is FAILED, so a retry elsewhere is asked for by UNAVAILABLE alone."""
    code = exc.code()
    return RoleError(_KIND.get(code, ErrorKind.FAILED), exc.details() or code.name, code.name)
