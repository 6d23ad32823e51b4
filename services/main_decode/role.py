"""The decode core: receives KV, admits requests, decodes them, takes over from the relay.

The same core serves the PD baselines' decode pool, the colocated pool (which
prefills locally), PDD's main decode (which takes over from the relay through
a token-id handoff, services/main_decode/handoff.py) and PDD's relay decode
(which decodes eagerly under a cap, keeping the relay's ledger; the relay's own
calls are services/relay_decode/role.py's). With a transfer, the first token
(produced by prefill) is released when the KV has landed, so TTFT includes the
transfer, as in a real PD system.

No I/O here: the KV receiver fills `transfers`, the relay is a RelayPeer by name,
the clock is an argument, and failures are RoleErrors. It implements services/roles.py
DecodePeer; its gRPC adapter is services/main_decode/server.py. Its data are the
protocol's messages (services/rpc/messages.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator, Callable

import numpy as np

from services.engine.sequence import EngineFull, Sequence, TokenEvent
from services.kv.transfers import TransferFailed, TransferTable
from services.main_decode.handoff import take_over, take_over_by_kv
from services.main_decode.stream import sequence_events
from services.relay_decode.relay import RelayLedger
from services.roles import RelayPeer, Sink
from services.rpc.messages import pb
from services.types import Clock, ErrorKind, Mode, RoleError, unix_time

if TYPE_CHECKING:  # the process comes in as an argument; its gRPC server and ops endpoints are not the core's
    from services.instances import RoleProcess


class MainDecodeRole:
    """`relay` gives the RelayPeer of a relay service by name (a Generate's `handoff_from`)."""

    def __init__(self, process: RoleProcess, transfers: TransferTable, ledger: RelayLedger,
                 relay: Callable[[str], RelayPeer], clock: Clock = unix_time) -> None:
        self.process, self.transfers, self.ledger = process, transfers, ledger
        self.scenario = process.plan.scenario
        self.relay, self.clock = relay, clock
        self.handoffs = {"one-shot": 0, "catch-up": 0}
        self.relay_missing = 0  # requests main decode decoded alone: the relay never had them

    async def announce(self, request: pb.TransferAnnounce) -> pb.TransferAck:
        if request.abort_reason:
            self.transfers.fail(request.request_id, request.abort_reason)
            return pb.TransferAck(accepted=True)
        if self.process.draining:
            return pb.TransferAck(accepted=False, reason="draining")
        self.transfers.announce(request.request_id, request.frames, request.real_bytes, request.emulated_bytes,
                                request.first_token, request.num_tokens, request.first_token_pending)
        return pb.TransferAck(accepted=True)

    async def cache_lookup(self, request: pb.CacheLookupRequest) -> pb.CacheLookupReply:
        return self.process.cache_lookup(request)

    async def generate(self, request: pb.GenerateRequest,
                       sink: Sink | None = None) -> AsyncIterator[TokenEvent | pb.GenerateEvent]:
        """Engine TokenEvents and then the GenerateEvent carrying the stats; `sink` may take tokens first."""
        rid, received = request.request_id, self.process.received(request)
        prompt, hashes, fingerprint = received.ids, received.hashes, received.fingerprint
        if not len(prompt) or request.max_tokens < 1:
            raise RoleError(ErrorKind.INVALID, "need a prompt and max_tokens >= 1")
        if self.process.draining:
            raise RoleError(ErrorKind.UNAVAILABLE, f"{self.process.service.name} is draining")
        try:
            engine = self.process.instance(request.instance, hashes)
        except KeyError as exc:
            raise RoleError(ErrorKind.INVALID, str(exc)) from None
        stats = pb.GenerateStats(instance=self.process.instance_name(engine))
        if not request.expect_transfer:
            handle = self.process.submit(engine, Sequence(request_id=rid, context=prompt, prompt_len=len(prompt),
                                                   kv_tokens=0, generate=request.max_tokens, first_position=0,
                                                   seed=request.seed, block_hashes=hashes, fingerprint=fingerprint))
            async for event in sequence_events(handle, stats, self.ledger, hit_from_engine=True, sink=sink):
                yield event
            return
        if request.relay:
            self.ledger.expect(rid)
        try:
            transfer = await self.transfers.wait(rid, self.scenario.transfer_timeout_s)
        except BaseException as exc:
            self.ledger.settle(rid)
            if isinstance(exc, TransferFailed):
                raise RoleError(ErrorKind.UNAVAILABLE, str(exc)) from None
            raise
        finally:
            self.transfers.discard(rid)
        stats.kv_transfer_s, stats.kv_arrived_unix = transfer.seconds, transfer.finished_at
        stats.kv_real_bytes, stats.kv_emulated_bytes = transfer.real_bytes, transfer.emulated_bytes
        stats.hit_tokens = kv_from = len(prompt) - transfer.num_tokens  # the sender's view of our cache
        if request.handoff_from:
            async for event in self._take_over(request, received, prompt, engine, stats, sink,
                                               transfer.first_token, kv_from):
                yield event
            return
        yield TokenEvent(0, transfer.first_token, 0.0)
        if request.max_tokens == 1:
            if request.relay:  # prefill's token was the whole output: the request ends on the relay
                stats.finished_on_relay, stats.relay_tokens = True, 1
                self.ledger.finished_here += 1
                self.ledger.settle(rid)
            yield pb.GenerateEvent(stats=stats)
            return
        seq = Sequence(request_id=rid, context=np.append(prompt, transfer.first_token), prompt_len=len(prompt),
                       kv_tokens=len(prompt), generate=request.max_tokens - 1, first_position=1, seed=request.seed,
                       block_hashes=hashes, fingerprint=fingerprint, kv_from=kv_from)
        try:
            handle = self.process.submit(engine, seq)
        except BaseException:
            self.ledger.settle(rid)
            raise
        if request.relay:
            self.ledger.add(rid, handle, transfer.first_token, request.max_tokens, self.scenario.pdd.relay_cap)
        try:
            async for event in sequence_events(handle, stats, self.ledger, hit_from_engine=False,
                                               relayed=request.relay, sink=sink):
                yield event
        finally:
            self.ledger.remove(rid)

    async def _take_over(self, request, received, prompt, engine, stats, sink, first_token: int, kv_from: int):
        """Main decode's part after its KV landed; `received` is the request's Prompt, `prompt` its ids (an array)."""
        relay = self.relay(request.handoff_from)
        try:
            if self.scenario.mode is Mode.PDD_KVSHIP:
                outcome = await take_over_by_kv(relay, engine, request, prompt, self.process.service.name,
                                                self._wait_handoff_kv, kv_from, received, self.clock)
            else:
                outcome = await take_over(relay, engine, request, prompt, self.scenario.pdd, kv_from, received,
                                          self.clock)
        except TransferFailed as exc:
            raise RoleError(ErrorKind.UNAVAILABLE, str(exc)) from None
        except RoleError as exc:
            if exc.kind is ErrorKind.NOT_FOUND:
                # The relay never decoded it (its own transfer missed the deadline): this KV is the only
                # one, so decode the whole request here, from prefill's token on.
                async for event in self._decode_alone(request, received, prompt, engine, stats, sink,
                                                      first_token, kv_from):
                    yield event
                return
            raise RoleError(ErrorKind.UNAVAILABLE,
                            f"handoff from {request.handoff_from} failed: {exc.message}") from None
        except (EngineFull, ValueError) as exc:
            raise RoleError(ErrorKind.EXHAUSTED, str(exc)) from None
        stats.handoff_mode, stats.handoff_chunks = outcome.mode.value, outcome.chunks
        stats.handed_off_at, stats.handoff_started_unix = outcome.cut, outcome.started_unix
        stats.finished_on_relay = outcome.finished_on_relay
        if outcome.handle is None:
            yield pb.GenerateEvent(stats=stats)
            return
        self.handoffs[outcome.mode.value] += 1

        def timed(event) -> bool:  # the stall ends with main decode's first token
            if type(event) is TokenEvent:
                stats.handoff_stall_s = self.clock() - outcome.started_unix
                # Every later token goes straight to the feed: this check would cost each of them a call.
                outcome.handle.forward(sink)
            return sink is not None and sink(event)

        async for event in sequence_events(outcome.handle, stats, self.ledger, hit_from_engine=False, sink=timed):
            yield event

    async def _decode_alone(self, request, received, prompt, engine, stats, sink, first_token: int, kv_from: int):
        self.relay_missing += 1
        stats.handed_off_at = 0
        yield TokenEvent(0, first_token, 0.0)
        if request.max_tokens == 1:
            yield pb.GenerateEvent(stats=stats)
            return
        seq = Sequence(request_id=request.request_id, context=np.append(prompt, first_token), prompt_len=len(prompt),
                       kv_tokens=len(prompt), generate=request.max_tokens - 1, first_position=1, seed=request.seed,
                       block_hashes=received.hashes, fingerprint=received.fingerprint, kv_from=kv_from)
        async for event in sequence_events(self.process.submit(engine, seq), stats, self.ledger, hit_from_engine=False,
                                           sink=sink):
            yield event

    async def _wait_handoff_kv(self, transfer_id: str):
        try:
            return await self.transfers.wait(transfer_id, self.scenario.transfer_timeout_s)
        finally:
            self.transfers.discard(transfer_id)
