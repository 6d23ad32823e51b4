"""The deployment token every gRPC call between services carries (docs/mesh.md §Control-plane security).

One random token per deployment, made by whoever starts it (`pdd-emu up`, or compose's `tokens`
service at first start), reaches each process through its environment or a file only its owner
reads: never a command line, never a log line. Clients send it as the `authorization` metadata of
every call (a client interceptor on the one channel per peer); servers refuse a call without it, or
with another, with UNAUTHENTICATED before any handler runs, and count it in
`pdd_rpc_unauthenticated_total`. Tokens are compared with hmac.compare_digest, in constant time.
"""

from __future__ import annotations

import hmac
import os

import grpc
from prometheus_client import CollectorRegistry, Counter

from services.credentials import MESH_TOKEN_ENV, MESH_TOKEN_FILE_ENV, MissingToken, token_from

TOKEN_ENV, TOKEN_FILE_ENV = MESH_TOKEN_ENV, MESH_TOKEN_FILE_ENV
METADATA_KEY = "authorization"
SCHEME = "Bearer "


def deployment_token(environ: os._Environ | dict[str, str] = os.environ) -> str | None:
    """The deployment token from $PDD_EMU_MESH_TOKEN_FILE or $PDD_EMU_MESH_TOKEN (token_from)."""
    return token_from(environ, TOKEN_ENV, TOKEN_FILE_ENV)


def required_token(environ: os._Environ | dict[str, str] = os.environ) -> str:
    token = deployment_token(environ)
    if token is None:
        raise MissingToken(f"no deployment token: set ${TOKEN_ENV} or ${TOKEN_FILE_ENV} "
                           "(`pdd-emu up` and the compose stack make one at start)")
    return token


def call_metadata(token: str) -> tuple[str, str]:
    return METADATA_KEY, SCHEME + token


class TokenCheck(grpc.aio.ServerInterceptor):
    """Refuses, with UNAUTHENTICATED, every call whose `authorization` is not `Bearer <the token>`."""

    def __init__(self, token: str, registry: CollectorRegistry) -> None:
        self._expected = (SCHEME + token).encode()
        self.refused = Counter("pdd_rpc_unauthenticated", "gRPC calls refused for a missing or wrong token",
                               ["method"], registry=registry)

    def allows(self, metadata) -> bool:
        given = next((value for key, value in metadata or () if key == METADATA_KEY), "")
        return hmac.compare_digest(given.encode(), self._expected)

    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        if self.allows(details.invocation_metadata):
            return await continuation(details)
        handler = await continuation(details)
        # Methods the server has, by name; any other as one label, so no caller can grow the series.
        self.refused.labels(method=details.method if handler is not None else "unknown").inc()
        if handler is None:  # gRPC answers UNIMPLEMENTED, which tells nothing
            return None
        return _refusing(handler)


async def _abort(request_or_iterator, context: grpc.aio.ServicerContext):
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong deployment token")


async def _abort_stream(request_or_iterator, context: grpc.aio.ServicerContext):
    await _abort(request_or_iterator, context)
    yield  # pragma: no cover (an async generator, as a streaming handler must be; abort raises first)


def _refusing(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that refuses the call without running it."""
    shape = (handler.request_streaming, handler.response_streaming)
    make = {(False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler, (True, True): grpc.stream_stream_rpc_method_handler}
    body = _abort_stream if handler.response_streaming else _abort
    return make[shape](body, request_deserializer=handler.request_deserializer,
                       response_serializer=handler.response_serializer)


class _TokenSender:
    def __init__(self, token: str) -> None:
        self._item = call_metadata(token)

    def _with_token(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), self._item)
        return grpc.aio.ClientCallDetails(details.method, details.timeout, metadata, details.credentials,
                                          details.wait_for_ready)


class _UnaryTokenSender(_TokenSender, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation, details, request):
        return await continuation(self._with_token(details), request)


class _StreamTokenSender(_TokenSender, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation, details, request):
        return await continuation(self._with_token(details), request)


def token_senders(token: str) -> list[grpc.aio.ClientInterceptor]:
    """Client interceptors that add the token to every call of a channel. gRPC files each interceptor
    under one kind only, and the services' calls are unary or server-streamed: one of each."""
    return [_UnaryTokenSender(token), _StreamTokenSender(token)]
