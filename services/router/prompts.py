"""How a request's prompt reaches each service: its ids once, then a reference where a lookup left them.

A CacheLookup carries the prompt's ids and the service keeps them (services/rpc/prompts.py);
the Generate or Prefill the router then sends that service carries a `HeldPrompt` (the
lookup's request id, the length and the fingerprint) instead. A service that no longer holds
it (restarted, evicted, expired) answers FAILED_PRECONDITION "prompt not held", and the call
is made once more with the ids (docs/mesh.md §Request flow). The fingerprint is computed once,
here, and every service uses it instead of computing its own (services/engine/sequence.py).
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import grpc

from services.rpc import pb
from services.rpc.prompts import NOT_HELD


def lookup_request(job) -> pb.CacheLookupRequest:
    return pb.CacheLookupRequest(request_id=job.request_id, prompt_ids=job.prompt.packed,
                                 prompt_fingerprint=job.fingerprint)


def looked_up(job, service: str) -> None:
    """`service` answered the lookup: it holds the prompt under the lookup's request id."""
    job.holders[service] = job.request_id


def prompt_fields(job, service: str) -> dict[str, Any]:
    """The prompt's fields of the next Generate or Prefill to `service`: a HeldPrompt where a lookup
    left the prompt (taken by that call, so only once), the ids otherwise."""
    held_as = job.holders.pop(service, None)
    if held_as is None:
        return whole_prompt(job)
    return {"held_prompt": pb.HeldPrompt(request_id=held_as, length=len(job.prompt), fingerprint=job.fingerprint)}


def whole_prompt(job) -> dict[str, Any]:
    return {"prompt_ids": job.prompt.packed, "prompt_fingerprint": job.fingerprint}


def with_prompt(request, job, service: str):
    """A copy of `request` (a Generate or Prefill with no prompt set) with the prompt's fields for `service`."""
    sent = type(request)()
    sent.CopyFrom(request)
    sent.MergeFrom(type(request)(**prompt_fields(job, service)))
    return sent


def resent_whole(request, job):
    """`request` once more, with the ids in place of its HeldPrompt."""
    sent = type(request)()
    sent.CopyFrom(request)
    sent.ClearField("held_prompt")
    sent.MergeFrom(type(request)(**whole_prompt(job)))
    return sent


def not_held(exc: BaseException) -> bool:
    """Whether a call failed because its service no longer holds the prompt it named."""
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() is grpc.StatusCode.FAILED_PRECONDITION \
        and (exc.details() or "").startswith(NOT_HELD)


class Resends:
    """Calls made once more with the whole prompt, by service: how often a held prompt was gone."""

    def __init__(self) -> None:
        self.by_service: dict[str, int] = {}

    def count(self, service: str) -> None:
        self.by_service[service] = self.by_service.get(service, 0) + 1


class ResendingDecodeStub:
    """A decode stub whose Generate, if it named a held prompt the service no longer has, is made once
    more with the ids: the refusal is the stream's first event, so the caller sees only the second call.

    Only the call's own events pass through here; tokens sent through the token feed do not.
    """

    def __init__(self, stub, job, service: str, resends: Resends) -> None:
        self._stub, self._job, self._service, self._resends = stub, job, service, resends

    def Generate(self, request, metadata=None):  # noqa: N802 (the gRPC method's name)
        return _ResendingCall(self, request, metadata)


class _ResendingCall:
    def __init__(self, stub: ResendingDecodeStub, request, metadata) -> None:
        self._owner, self._request, self._metadata = stub, request, metadata
        self._call = stub._stub.Generate(request, metadata=metadata)
        self._cancelled = False

    def cancel(self) -> bool:
        self._cancelled = True
        return self._call.cancel()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        events = self._call.__aiter__()
        try:
            first = await events.__anext__()
        except StopAsyncIteration:
            return
        except grpc.aio.AioRpcError as exc:
            if self._cancelled or not not_held(exc):
                raise
            owner = self._owner
            owner._resends.count(owner._service)
            self._call = owner._stub.Generate(resent_whole(self._request, owner._job), metadata=self._metadata)
            events = self._call.__aiter__()
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return
        yield first
        async for event in events:
            yield event
