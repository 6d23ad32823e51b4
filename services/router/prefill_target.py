"""Which prefill pool serves a request: the one picked, or the next when that one is down.

A pool whose channel answers UNAVAILABLE (after the channel's own retries, services/rpc) passes the
request on to the next pool, so the others take a dead pool's load (a degraded mode:
docs/reliability.md). Any other error is the request's.
"""

from __future__ import annotations

import grpc

from services.scenario.plan import ServicePlan
from services.rpc import metadata
from services.types import Degraded, Role


class PrefillTarget:
    """The prefill pool serving a request: the one picked, or the next when that one was down."""

    def __init__(self, service: ServicePlan) -> None:
        self.service = service
        self.passed_over: list[str] = []

    @property
    def name(self) -> str:
        return self.service.name

    @property
    def degraded(self) -> str | None:
        return Degraded.PREFILL_DOWN.value if self.passed_over else None


async def prefill_any(peers, request, job, target: PrefillTarget):
    """Prefill on target's pool, or on the next when that one is unreachable (a degraded mode)."""
    pools = peers.services(Role.PREFILL)
    start = pools.index(target.service)
    for step in range(len(pools)):
        target.service = pools[(start + step) % len(pools)]
        try:
            return await peers.prefill[target.name].Prefill(
                request, timeout=peers.plan.scenario.request_timeout_s, metadata=metadata(job.request_id))
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE or step == len(pools) - 1:
                raise
            target.passed_over.append(target.name)
