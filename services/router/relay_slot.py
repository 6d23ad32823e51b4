"""The router's own count of the requests it sent to each relay, and the relay load it makes.

A relay counts a request only once its KV has landed; the router counts it from the step that
chooses the relay, so a burst of choices sees the relay filling (docs/pdd.md §Pipeline choice).
It counts each request twice: as one sequence of the relay's running cap, and as the KV blocks
its context will hold of the relay's memory, which at long contexts is the tighter.
"""

from __future__ import annotations

import collections
import math

from services.roles import RouterPeers as Peers
from services.router.pipelines import Job
from services.scenario.sizing import instance_sizing


def relay_dispatches(peers: Peers) -> collections.Counter:
    """Requests this router has sent to each relay whose relay stream has not ended yet."""
    if getattr(peers, "relayed", None) is None:
        peers.relayed = collections.Counter()
    return peers.relayed


def relay_dispatched_blocks(peers: Peers) -> collections.Counter:
    """The KV blocks those requests' contexts will hold at each relay."""
    if getattr(peers, "relayed_blocks", None) is None:
        peers.relayed_blocks = collections.Counter()
    return peers.relayed_blocks


def context_blocks(peers: Peers, prompt_tokens: int, max_tokens: int) -> int:
    """The blocks a relayed request holds at most: its prompt and the positions the relay may produce."""
    scenario = peers.plan.scenario
    return math.ceil((prompt_tokens + min(max_tokens, scenario.pdd.relay_cap)) / scenario.engine.block_size)


class RelaySlot:
    """One request counted against a relay from the moment the router chooses it until the relay's part ends."""

    def __init__(self, peers: Peers, relay: str, job: Job) -> None:
        self.requests, self.blocks = relay_dispatches(peers), relay_dispatched_blocks(peers)
        self.relay, self.size, self.held = relay, context_blocks(peers, len(job.prompt), job.max_tokens), True
        self.requests[relay] += 1
        self.blocks[relay] += self.size

    def release(self) -> None:
        if self.held:
            self.held = False
            self.requests[self.relay] -= 1
            self.blocks[self.relay] -= self.size


def load_with_dispatches(peers: Peers, relay, reported: float) -> float:
    """The highest of the relay's own load and the two loads this router's dispatches make.

    A relay counts a request only once its KV has landed and the engine took it; requests still in
    prefill or on the RDMA link are invisible to it, so a burst would all see an idle relay and its
    queue would grow far past relay_max_load. The router's own count closes that gap, in sequences
    against the running cap and in context blocks against the KV pool: the running cap derives from
    the pool and runs to thousands, while a relay's memory holds a few dozen 64K-token contexts
    (docs/pdd.md §Pipeline choice).
    """
    sizing = instance_sizing(peers.plan.scenario, relay.pool)
    count = relay.pool.count
    return max(reported, relay_dispatches(peers)[relay.name] / (count * sizing.max_running),
               relay_dispatched_blocks(peers)[relay.name] / (count * sizing.kv_capacity_blocks))
