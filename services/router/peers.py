"""The router's peers: one gRPC channel per prefill and decode service, and the calls every pipeline makes.

The adapter of the router's pipelines (services/roles.py `RouterPeers`): cache lookups (which pool
holds the longest prefix: services/router/placement.py), Generate streams through each service's
token feed (services/router/feed.py), prefills, the prompt's fields for each call
(services/router/prompts.py, resent by services/router/resend.py), a relay's output cap and the
cancellation of a transfer nobody will read. A failed call leaves here as the RoleError of its
status (services/rpc/errors.py), so no pipeline sees gRPC.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, Mapping

from services.profiles import load_model
from services.router.deadlines import CallDeadlines
from services.router.decode_stream import DecodeStream
from services.router.feed import TokenFeed, grpc_feed, tcp_feed
from services.router.hung import HangGuard
from services.router.prompts import Resends, lookup_request, not_held, resent_whole, with_prompt
from services.router.resend import ResendingDecodeStub
from services.rpc import channel, metadata, pb, pb_grpc
from services.rpc.errors import unary
from services.scenario.plan import MeshPlan, ServicePlan
from services.types import ErrorKind, Role, RoleError

if TYPE_CHECKING:
    from services.router.pipelines import Job



class Peers:
    """One gRPC channel per peer service, opened at start-up, closed at shutdown."""

    def __init__(self, plan: MeshPlan, stubs: Mapping[str, Any] | None = None) -> None:
        """`stubs`: each peer's stub by service name; None: a gRPC channel to every peer in the plan."""
        self.plan = plan
        over_sockets = stubs is None  # given stubs (a simulation) take each feed through the stub
        self._channels = {} if not over_sockets else {
            s.name: channel(plan.grpc_address(s.name, "router")) for s in plan.services if s.grpc_port}
        if stubs is None:
            stubs = {n: (pb_grpc.PrefillStub if plan.service(n).role is Role.PREFILL else pb_grpc.DecodeStub)(c)
                     for n, c in self._channels.items()}
        self.prefill = {n: stub for n, stub in stubs.items() if plan.service(n).role is Role.PREFILL}
        self.decode = {n: stub for n, stub in stubs.items() if plan.service(n).role is not Role.PREFILL}
        self._next_prefill = 0
        self.kv_bytes_per_token = load_model(plan.scenario.model).kv_bytes_per_token
        self._cancels: set[asyncio.Task] = set()
        self.feeds = {n: TokenFeed(tcp_feed(plan.feed_address(n, "router")) if over_sockets
                                   and plan.service(n).feed_port else grpc_feed(stub), n)
                      for n, stub in self.decode.items()}
        self.resends = Resends()
        # A mesh's fed Generate is the unary GenerateFed; a simulation's stubs keep the stream, which
        # its fault campaign and census follow (services/simulate/outage.py), and cost nothing per call.
        self.fed_unary = over_sockets
        # Set by a simulation, whose client reads each token's arrival time from the token (LazyInbox).
        self.lazy_tokens = False

    def generate(self, service: str, request: pb.GenerateRequest, job: Job) -> DecodeStream:
        """Open a Generate stream at `service`; its tokens come through the service's feed when it is open.

        `request` carries no prompt: the prompt's fields for `service` are added here (services/router/prompts.py).
        """
        feed = self.feeds[service]
        request = with_prompt(request, job, service)
        stub = self.decode[service]
        if request.HasField("held_prompt"):
            stub = ResendingDecodeStub(stub, job, service, self.resends)
        stream = DecodeStream(stub, request, feed, self.lazy_tokens, self.fed_unary)
        feed.start()
        return stream

    async def close(self) -> None:
        await self.hangs.close()
        await asyncio.gather(*self._cancels, return_exceptions=True)
        await asyncio.gather(*(feed.close() for feed in self.feeds.values()))
        await asyncio.gather(*(c.close() for c in self._channels.values()))

    @functools.cached_property
    def deadlines(self) -> CallDeadlines:
        return CallDeadlines(self.plan)

    @functools.cached_property
    def hangs(self) -> HangGuard:
        return HangGuard(self.answers, self.deadlines.host_allowance_s)

    async def cache_lookup(self, service: str, job: Job) -> pb.CacheLookupReply:
        """`service`'s CacheLookup, under its own deadline (services/router/deadlines.py): a miss is the
        pool not answering (DEADLINE), which placement passes over as it passes over a dead one; a pool
        found hung (services/router/hung.py) is refused at once, as UNAVAILABLE."""
        stubs = self.prefill if self.plan.service(service).role is Role.PREFILL else self.decode
        self.hangs.refuse_if_hung(service, "CacheLookup")
        try:
            return await unary(stubs[service].CacheLookup, lookup_request(job), job.request_id,
                               self.deadlines.small_s(service))
        except RoleError as exc:
            if exc.kind is ErrorKind.DEADLINE:
                self.hangs.missed(service)  # its Health is asked; silent, it is passed over from then on
            raise

    async def submit_prefill(self, pool: str, request: pb.PrefillRequest, job: Job) -> pb.PrefillReply:
        """`pool`'s Prefill; made once more with the ids if the pool no longer holds the prompt it named.

        A pool that lets the call's deadline pass and then does not answer its Health either is hung:
        the call fails as UNAVAILABLE, the crashed pool's status, so the request takes the same path
        (services/router/hung.py).
        """
        receivers = tuple(r for r in (request.kv_target, request.kv_target_secondary) if r)
        with self.deadlines.prefilling(pool, len(job.prompt)):
            try:
                return await self._prefill_or_hung(pool, request, job, receivers)
            except RoleError as exc:
                if not not_held(exc):
                    raise
            self.resends.count(pool)
            return await self._prefill_or_hung(pool, resent_whole(request, job), job, receivers)

    async def _prefill_or_hung(self, pool: str, request: pb.PrefillRequest, job: Job,
                               receivers: tuple[str, ...]) -> pb.PrefillReply:
        self.hangs.refuse_if_hung(pool, "Prefill")
        call = self.prefill[pool].Prefill(request, timeout=self.plan.scenario.request_timeout_s,
                                          metadata=metadata(job.request_id))
        return await self.hangs.reply(pool, "Prefill", call,
                                      lambda: self.deadlines.prefill_s(pool, len(job.prompt), receivers))

    async def answers(self, service: str) -> bool:
        """Whether `service` answers its Health within the host's allowance: alive, if busy."""
        stub = self.prefill.get(service) or self.decode[service]
        try:
            await unary(stub.Health, pb.Empty(), "liveness", self.deadlines.host_allowance_s)
        except RoleError:
            return False
        return True

    async def cancel_transfer(self, pool: str, request_id: str, reason: str) -> bool:
        reply = await unary(self.prefill[pool].CancelTransfer, pb.CancelRequest(request_id=request_id, reason=reason),
                             request_id, self.deadlines.small_s(pool))
        return reply.cancelled

    async def set_limit(self, service: str, request_id: str, limit: int | None) -> None:
        request = pb.LimitRequest(request_id=request_id, limit=-1 if limit is None else limit)
        await unary(self.decode[service].SetLimit, request, request_id, self.deadlines.small_s(service))

    def abandon_transfer(self, pool: str, job: Job) -> None:
        """The request ended before its KV landed: stop the bytes nobody will read.

        Without this a failed or abandoned request's transfer keeps its place on the WAN, so after
        a partition the line first carries the KV of requests that already timed out.
        """
        task = asyncio.ensure_future(self._cancel_transfer(pool, job))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel_transfer(self, pool: str, job: Job) -> None:
        try:
            await self.cancel_transfer(pool, job.request_id, "the request ended")
        except RoleError:
            pass  # prefill is gone too: nothing of this request is being sent

    def services(self, *roles: Role) -> list[ServicePlan]:
        return self.plan.with_role(*roles)

    def pick_prefill(self) -> ServicePlan:
        pools = self.services(Role.PREFILL)
        self._next_prefill = (self._next_prefill + 1) % len(pools)
        return pools[self._next_prefill]

