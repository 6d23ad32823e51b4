"""One sequence's way out of a decode engine: its token events, then the GenerateEvent with its stats.

A relayed sequence (the relay's eager decode) also keeps the relay's ledger as its tokens land,
and its stream ends at the cut a handoff sets (services/relay_decode/relay.py).
"""

from __future__ import annotations

from typing import AsyncIterator

from services.engine.scheduler import SequenceHandle
from services.engine.sequence import FinishedEvent, TokenEvent
from services.relay_decode.relay import RelayLedger
from services.roles import Sink
from services.rpc.messages import pb


async def sequence_events(handle: SequenceHandle, stats: pb.GenerateStats, ledger: RelayLedger,
                          hit_from_engine: bool, relayed: bool = False,
                          sink: Sink | None = None) -> AsyncIterator[TokenEvent | pb.GenerateEvent]:
    """Token events of one sequence, then its stats; a relayed one also ends at its handoff cut.

    With a sink, tokens go to it as each step ends and only the rest comes through here; a
    relayed sequence's sink also keeps the relay's ledger, and a stream at its cut ends when
    the handoff releases the sequence.
    """
    rid = handle.request_id
    relayed_request = ledger.requests.get(rid) if relayed else None
    if sink is not None:
        handle.forward(sink if relayed_request is None else relayed_request.forwarding(sink))
    try:
        async for event in handle.events():
            if isinstance(event, FinishedEvent):
                s = event.stats
                if hit_from_engine:
                    stats.hit_tokens = s.hit_tokens
                stats.computed_tokens, stats.queued_s = s.computed_tokens, s.queued_s or 0.0
                stats.finished_on_relay = relayed
                if relayed:
                    ledger.finished_here += 1
                    stats.relay_tokens = len(relayed_request.ids)
                yield pb.GenerateEvent(stats=stats)
                return
            if relayed_request is not None:
                if relayed_request.cut is not None and event.position >= relayed_request.cut:
                    break
                relayed_request.produced(event.position, event.token_id)
            yield event
            if relayed_request is not None and relayed_request.cut is not None \
                    and len(relayed_request.ids) >= relayed_request.cut:
                break
        if relayed_request is not None and relayed_request.cut is not None:
            stats.handed_off_at = stats.relay_tokens = relayed_request.cut
            stats.finished_on_relay = relayed_request.finished
            yield pb.GenerateEvent(stats=stats)
    finally:
        handle.cancel()  # a no-op once finished; frees the blocks if the caller went away
