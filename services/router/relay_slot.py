"""The router's own count of the requests it sent to each relay, and the relay load it makes.

A relay counts a request only once its KV has landed; the router counts it from the step that
chooses the relay, so a burst of choices sees the relay filling (docs/pdd.md §Pipeline choice).
"""

from __future__ import annotations

import collections

from services.roles import RouterPeers as Peers
from services.scenario.sizing import instance_sizing


def relay_dispatches(peers: Peers) -> collections.Counter:
    """Requests this router has sent to each relay whose relay stream has not ended yet."""
    if getattr(peers, "relayed", None) is None:
        peers.relayed = collections.Counter()
    return peers.relayed


class RelaySlot:
    """One request counted against a relay from the moment the router chooses it until the relay's part ends."""

    def __init__(self, dispatches: collections.Counter, relay: str) -> None:
        self.dispatches, self.relay, self.held = dispatches, relay, True
        dispatches[relay] += 1

    def release(self) -> None:
        if self.held:
            self.held = False
            self.dispatches[self.relay] -= 1


def load_with_dispatches(peers: Peers, relay, reported: float) -> float:
    """The higher of the relay's own load and the load this router's dispatches make.

    A relay counts a request only once its KV has landed and the engine took it; requests still in
    prefill are invisible to it, so a burst would all see an idle relay and its queue would grow far
    past relay_max_load. The router's own count closes that gap (docs/pdd.md §Pipeline choice).
    """
    capacity = relay.pool.count * instance_sizing(peers.plan.scenario, relay.pool).max_running
    return max(reported, relay_dispatches(peers)[relay.name] / capacity)
