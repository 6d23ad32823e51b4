"""How a request's prompt reaches each service: its ids once, then a reference where a lookup left them.

A CacheLookup carries the prompt's ids and the service keeps them (services/rpc/prompts.py);
the Generate or Prefill the router then sends that service carries a `HeldPrompt` (the
lookup's request id, the length and the fingerprint) instead. A service that no longer holds
it (restarted, evicted, expired) answers FAILED_PRECONDITION "prompt not held", and the call
is made once more with the ids (docs/mesh.md §Request flow; the calls are made again by the Peers
adapter, services/router/resend.py). The fingerprint is computed once, here, and every service
uses it instead of computing its own (services/engine/sequence.py).
"""

from __future__ import annotations

from typing import Any

from services.rpc.messages import pb
from services.rpc.prompts import NOT_HELD
from services.types import ErrorKind, RoleError


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
    return isinstance(exc, RoleError) and exc.kind is ErrorKind.PRECONDITION and exc.message.startswith(NOT_HELD)


class Resends:
    """Calls made once more with the whole prompt, by service: how often a held prompt was gone."""

    def __init__(self) -> None:
        self.by_service: dict[str, int] = {}

    def count(self, service: str) -> None:
        self.by_service[service] = self.by_service.get(service, 0) + 1
