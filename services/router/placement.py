"""Which pool serves a request: the one holding the longest prefix of its prompt (ties: the least loaded).

Each pool of the role answers a CacheLookup (its hit and load); the lookup leaves the prompt at each
pool that answered, so the call that follows names it instead of sending it again
(services/router/prompts.py). A pool that does not answer, or not within its lookup's deadline (services/router/deadlines.py), is
passed over.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from services.roles import RouterPeers as Peers  # the Protocol; services/router/peers.py adapts it
from services.router.failures import api_error
from services.router.prompts import looked_up
from services.scenario.plan import ServicePlan
from services.types import Role, RoleError

if TYPE_CHECKING:
    from services.router.pipelines import Job


async def best_decode(peers: Peers, job: Job, roles: tuple[Role, ...]) -> tuple[ServicePlan, int]:
    """The decode pool holding the longest prefix of the prompt (ties: least loaded).

    A pool that does not answer is skipped; when none answers, the request fails with its status.
    """
    candidates = peers.services(*roles)
    answered, replies = await _lookups(peers, job, candidates)
    if not answered:
        raise api_error(replies[0], f"cache lookup at {candidates[0].name}")
    for service, _ in answered:
        looked_up(job, service.name)
    best = max(answered, key=lambda cr: (cr[1].hit_tokens, -cr[1].load))
    job.instances[best[0].name] = best[1].instance
    return best[0], best[1].hit_tokens


async def best_prefill(peers: Peers, job: Job, default: ServicePlan) -> ServicePlan:
    """The prefill pool holding the longest prefix of the prompt (ties: least loaded).

    With one pool there is nothing to choose and no lookup; when none answers, `default`
    (prefill_any then passes an unreachable pool over).
    """
    pools = peers.services(Role.PREFILL)
    if len(pools) < 2:
        return default
    answered, _ = await _lookups(peers, job, pools)
    if not answered:
        return default
    for service, _ in answered:
        looked_up(job, service.name)
    return max(answered, key=lambda cr: (cr[1].hit_tokens, -cr[1].load))[0]


async def _lookups(peers: Peers, job: Job, services: list[ServicePlan]):
    """Every service's CacheLookup reply, concurrently: (service, reply) of those that answered, and all replies."""
    replies = await asyncio.gather(*(peers.cache_lookup(s.name, job) for s in services),
                                   return_exceptions=True)
    for reply in replies:
        if isinstance(reply, BaseException) and not isinstance(reply, RoleError):
            raise reply
    return [(s, r) for s, r in zip(services, replies) if not isinstance(r, BaseException)], replies
