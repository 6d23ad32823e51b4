"""Degraded modes: serve what the mesh still can instead of answering 503 (docs/reliability.md).

- Main decode down: the relay serves whole requests, prefill shipping the KV to it alone over
  RDMA (P-RLD, `fallback`). Only while the relay has room: a saturated relay still means 503.
  A P-MD request whose main decode (or its WAN transfer) fails before its first token is served
  the same way (`degraded: main-decode-failed`).
- No prefill pool reachable: the decode pool prefills the prompt itself (services/router/pipelines.py
  `prefill_here`, `degraded: prefill-unreachable`).
- A prefill pool down: the prefill goes to another pool (`services/router/prefill_target.py`).
- The relay's transfer missed its deadline while main decode holds the KV: main decode decodes
  from the first token itself (services/main_decode/server.py) and the router streams it.

Each one is named in the request's `pdd` stats (`degraded`) and counted in /metrics
(`pdd_degraded_requests{kind}`).
"""

from __future__ import annotations

import dataclasses
from typing import AsyncIterator

from services.scenario.plan import ServicePlan
from services.roles import RouterPeers as Peers  # the Protocol; services/router/peers.py adapts it
from services.router.failures import ApiError
from services.router.pipelines import Finished, Job, Token, run_p_d
from services.router.relay_slot import RelaySlot
from services.router.stats import PolicyNote
from services.types import Degraded, Mode, Pipeline


def retried_on_relay(failure: ApiError) -> bool:
    """Whether a P-MD request that failed before its first token goes to the relay instead.

    Main decode's stream broke (502: its token feed) or its call failed as unreachable or cancelled
    (503): main decode died or restarted under the request, or the WAN transfer to it broke (a link
    reset). Its own refusals (429, 400) and the request's deadline (504) are the request's outcome.
    """
    return failure.status in (502, 503)


def relay_retry(job: Job) -> Job:
    """The job once more, under its own id: the first attempt's streams and transfer may still be
    unwinding at the router's feed, at prefill and at main decode, and must not meet this one."""
    return dataclasses.replace(job, request_id=f"{job.request_id}/relay")


async def relay_alone(peers: Peers, job: Job, mode: Mode, relay: ServicePlan | None, relay_hit: int,
                      relay_load: float, cause: ApiError,
                      reason: str = "main decode unreachable", kind: Degraded = Degraded.MAIN_DECODE_DOWN
                      ) -> AsyncIterator[Token | Finished]:
    """P-RLD while no main decode answers its cache lookup, or after it failed before its first token."""
    spec = peers.plan.scenario.pdd
    if relay is None or relay_load >= spec.relay_max_load:
        why = "no relay reachable" if relay is None else f"the relay is saturated (load {relay_load:.2f})"
        raise ApiError(cause.status, f"{cause.message}; {why} to serve it instead", kind=cause.kind, code=cause.code)
    slot = RelaySlot(peers, relay.name, job)
    try:
        async for item in run_p_d(peers, job, mode, relay, relay_hit, Pipeline.P_RLD):
            if type(item) is not Finished:  # a Token or a TokenRun
                yield item
                continue
            stats = item.stats
            stats.fallback, stats.degraded = True, kind.value
            stats.rld_tokens, stats.md_tokens = stats.md_tokens, 0  # the relay decoded it all
            # the reason is one of a few fixed strings, so that reports can tally them; the failure is its own field
            stats.policy = PolicyNote(None, reason)
            stats.degraded_cause = cause.message
            yield item
    finally:
        slot.release()
