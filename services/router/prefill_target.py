"""Which prefill pool serves a request: the one picked, or the next when that one is down.

A pool whose channel answers UNAVAILABLE (after the channel's own retries, services/rpc) passes the
request on to the next pool, so the others take a dead pool's load (a degraded mode:
docs/reliability.md). When none answers, the decode pool prefills the prompt itself
(`no_prefill_reachable`, services/router/pipelines.py `prefill_here`). Any other error is the request's.
"""

from __future__ import annotations

import asyncio

import grpc

from services.scenario.plan import ServicePlan
from services.router.prompts import not_held, resent_whole, with_prompt
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
    """Prefill on target's pool, or on the next when that one is unreachable (a degraded mode).

    `request` carries no prompt: each pool gets the prompt's fields for it (services/router/prompts.py).
    """
    pools = peers.services(Role.PREFILL)
    start = pools.index(target.service)
    for step in range(len(pools)):
        target.service = pools[(start + step) % len(pools)]
        try:
            return await _prefill_once(peers, with_prompt(request, job, target.name), job, target.name)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE or step == len(pools) - 1:
                raise
            target.passed_over.append(target.name)


async def _prefill_once(peers, request, job, pool: str):
    """One pool's Prefill; sent once more with the ids if the pool no longer holds the prompt it named."""
    stub, timeout = peers.prefill[pool], peers.plan.scenario.request_timeout_s
    try:
        return await stub.Prefill(request, timeout=timeout, metadata=metadata(job.request_id))
    except grpc.aio.AioRpcError as exc:
        if not not_held(exc):
            raise
    peers.resends.count(pool)
    return await stub.Prefill(resent_whole(request, job), timeout=timeout, metadata=metadata(job.request_id))


def no_prefill_reachable(call: asyncio.Future, raised: BaseException) -> bool:
    """Whether a pipeline that stopped with `raised` did so because no prefill pool answered at all.

    Prefill itself never answers UNAVAILABLE (its refusals are INVALID_ARGUMENT, RESOURCE_EXHAUSTED,
    FAILED_PRECONDITION), so that code is the transport's: every pool is down or restarting. A
    cancellation of the request itself (the client left, its deadline) is never one.
    """
    task = asyncio.current_task()
    if isinstance(raised, asyncio.CancelledError) and task is not None and task.cancelling():
        return False
    if not call.done() or call.cancelled():
        return False
    failure = call.exception()
    return isinstance(failure, grpc.aio.AioRpcError) and failure.code() is grpc.StatusCode.UNAVAILABLE
