"""Which prefill pool serves a request: the one picked, or the next when that one is down.

A pool that is unavailable (its channel answered UNAVAILABLE after its own retries, services/rpc)
passes the request on to the next pool, so the others take a dead pool's load (a degraded mode:
docs/reliability.md). When none answers, the decode pool prefills the prompt itself
(`no_prefill_reachable`, services/router/pipelines.py `prefill_here`). Any other error is the request's.
"""

from __future__ import annotations

import asyncio

from services.scenario.plan import ServicePlan
from services.router.failures import from_a_peer
from services.router.prompts import with_prompt
from services.types import Degraded, ErrorKind, Role, RoleError


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

    `request` carries no prompt: each pool gets the prompt's fields for it (services/router/prompts.py),
    and the ids once more if it no longer holds the prompt it was named (the Peers adapter's resend).
    """
    pools = peers.services(Role.PREFILL)
    start = pools.index(target.service)
    for step in range(len(pools)):
        target.service = pools[(start + step) % len(pools)]
        try:
            return await peers.submit_prefill(target.name, with_prompt(request, job, target.name), job)
        except RoleError as exc:
            if exc.kind is not ErrorKind.UNAVAILABLE or step == len(pools) - 1:
                raise
            target.passed_over.append(target.name)


def no_prefill_reachable(call: asyncio.Future, raised: BaseException) -> bool:
    """Whether a pipeline that stopped with `raised` did so because no prefill pool answered at all.

    Prefill itself never answers unavailable (its refusals are invalid, exhausted, precondition), so
    that kind is the transport's: every pool is down or restarting. A cancellation of the request
    itself (the client left, its deadline) is never one, nor a break of the router's own token feed.
    """
    task = asyncio.current_task()
    if isinstance(raised, asyncio.CancelledError) and task is not None and task.cancelling():
        return False
    if isinstance(raised, RoleError) and not from_a_peer(raised):
        return False
    if not call.done() or call.cancelled():
        return False
    failure = call.exception()
    return isinstance(failure, RoleError) and failure.kind is ErrorKind.UNAVAILABLE
