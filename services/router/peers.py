"""The router's peers: one gRPC channel per prefill and decode service, and the calls every pipeline makes.

Cache lookups (the decode or prefill pool holding the longest prefix of the prompt), Generate
streams through each service's token feed (services/router/feed.py), the prompt's fields for
each call (services/router/prompts.py) and the cancellation of a transfer nobody will read.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Mapping

import grpc

from services.profiles import load_model
from services.router.api import ApiError
from services.router.feed import DecodeStream, TokenFeed
from services.router.prefill_target import PrefillTarget
from services.router.prompts import Resends, ResendingDecodeStub, lookup_request, looked_up, with_prompt
from services.rpc import channel, metadata, pb, pb_grpc
from services.scenario.plan import MeshPlan, ServicePlan
from services.types import Role

if TYPE_CHECKING:
    from services.router.pipelines import Job


def map_rpc_error(exc: grpc.aio.AioRpcError, stage: str) -> ApiError:
    code = exc.code()
    status = 503 if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED) else \
        504 if code is grpc.StatusCode.DEADLINE_EXCEEDED else \
        429 if code is grpc.StatusCode.RESOURCE_EXHAUSTED else \
        400 if code is grpc.StatusCode.INVALID_ARGUMENT else 502
    return ApiError(status, f"{stage} failed: {exc.details() or code.name}", kind="upstream_error", code=code.name)


class Peers:
    """One gRPC channel per peer service, opened at start-up, closed at shutdown."""

    def __init__(self, plan: MeshPlan, stubs: Mapping[str, Any] | None = None) -> None:
        """`stubs`: each peer's stub by service name; None: a gRPC channel to every peer in the plan."""
        self.plan = plan
        self._channels = {} if stubs is not None else {
            s.name: channel(plan.grpc_address(s.name, "router")) for s in plan.services if s.grpc_port}
        if stubs is None:
            stubs = {n: (pb_grpc.PrefillStub if plan.service(n).role is Role.PREFILL else pb_grpc.DecodeStub)(c)
                     for n, c in self._channels.items()}
        self.prefill = {n: stub for n, stub in stubs.items() if plan.service(n).role is Role.PREFILL}
        self.decode = {n: stub for n, stub in stubs.items() if plan.service(n).role is not Role.PREFILL}
        self._next_prefill = 0
        self.kv_bytes_per_token = load_model(plan.scenario.model).kv_bytes_per_token
        self._cancels: set[asyncio.Task] = set()
        self.feeds = {n: TokenFeed(stub, n) for n, stub in self.decode.items()}
        self.resends = Resends()

    def generate(self, service: str, request: pb.GenerateRequest, job: Job) -> DecodeStream:
        """Open a Generate stream at `service`; its tokens come through the service's feed when it is open.

        `request` carries no prompt: the prompt's fields for `service` are added here (services/router/prompts.py).
        """
        feed = self.feeds[service]
        request = with_prompt(request, job, service)
        stub = self.decode[service]
        if request.HasField("held_prompt"):
            stub = ResendingDecodeStub(stub, job, service, self.resends)
        stream = DecodeStream(stub, request, feed)
        feed.start()
        return stream

    async def close(self) -> None:
        await asyncio.gather(*self._cancels, return_exceptions=True)
        await asyncio.gather(*(feed.close() for feed in self.feeds.values()))
        await asyncio.gather(*(c.close() for c in self._channels.values()))

    def abandon_transfer(self, prefill: PrefillTarget, job: Job) -> None:
        """The request ended before its KV landed: stop the bytes nobody will read.

        Without this a failed or abandoned request's transfer keeps its place on the WAN, so after
        a partition the line first carries the KV of requests that already timed out.
        """
        task = asyncio.ensure_future(self._cancel_transfer(prefill, job))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel_transfer(self, prefill: PrefillTarget, job: Job) -> None:
        try:
            await self.prefill[prefill.name].CancelTransfer(
                pb.CancelRequest(request_id=job.request_id, reason="the request ended"), timeout=5.0,
                metadata=metadata(job.request_id))
        except grpc.aio.AioRpcError:
            pass  # prefill is gone too: nothing of this request is being sent

    def services(self, *roles: Role) -> list[ServicePlan]:
        return self.plan.with_role(*roles)

    def pick_prefill(self) -> ServicePlan:
        pools = self.services(Role.PREFILL)
        self._next_prefill = (self._next_prefill + 1) % len(pools)
        return pools[self._next_prefill]

    async def best_decode(self, job: Job, roles: tuple[Role, ...]) -> tuple[ServicePlan, int]:
        """The decode pool holding the longest prefix of the prompt (ties: least loaded).

        A pool that does not answer is skipped; when none answers, the request fails with its status.
        """
        candidates = self.services(*roles)
        answered, replies = await self._lookups(job, candidates, self.decode, timeout_s=5.0)
        if not answered:
            raise map_rpc_error(replies[0], f"cache lookup at {candidates[0].name}")
        for service, _ in answered:
            looked_up(job, service.name)
        best = max(answered, key=lambda cr: (cr[1].hit_tokens, -cr[1].load))
        job.instances[best[0].name] = best[1].instance
        return best[0], best[1].hit_tokens

    async def best_prefill(self, job: Job, default: ServicePlan) -> ServicePlan:
        """The prefill pool holding the longest prefix of the prompt (ties: least loaded).

        With one pool there is nothing to choose and no lookup; when none answers, `default`
        (prefill_any then passes an unreachable pool over).
        """
        pools = self.services(Role.PREFILL)
        if len(pools) < 2:
            return default
        answered, _ = await self._lookups(job, pools, self.prefill, timeout_s=2.0)
        if not answered:
            return default
        for service, _ in answered:
            looked_up(job, service.name)
        return max(answered, key=lambda cr: (cr[1].hit_tokens, -cr[1].load))[0]

    async def _lookups(self, job: Job, services: list[ServicePlan], stubs: dict, timeout_s: float):
        """Every service's CacheLookup reply, concurrently: (service, reply) of those that answered, and all replies."""
        request = lookup_request(job)
        replies = await asyncio.gather(*(
            stubs[s.name].CacheLookup(request, timeout=timeout_s, metadata=metadata(job.request_id))
            for s in services), return_exceptions=True)
        for reply in replies:
            if isinstance(reply, BaseException) and not isinstance(reply, grpc.aio.AioRpcError):
                raise reply
        return [(s, r) for s, r in zip(services, replies) if not isinstance(r, BaseException)], replies
