"""The decode process: receives KV, admits requests, decodes with continuous batching.

The same code serves the PD baselines' decode pool, the colocated pool (which
prefills locally), PDD's main decode (which takes over from the relay through
a token-id handoff) and PDD's relay decode (which decodes eagerly under a cap).
With a transfer, the first token (produced by prefill) is released when the KV
has landed, so TTFT includes the transfer, as in a real PD system.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import grpc

from services.engine.sequence import EngineFull, FinishedEvent, Sequence, TokenEvent
from services.instances import RoleProcess
from services.kv.receiver import KvReceiver, ReceiverLimits, TransferFailed, TransferTable
from services.scenario.plan import MeshPlan, ServicePlan
from services.kv.shipper import KvRoutes, KvShipper
from services.main_decode.feed import FeedTable, Route
from services.main_decode.handoff import take_over, take_over_by_kv
from services.relay_decode.relay import RelayLedger
from services.relay_decode.servicer import RelayServicer
from services.rpc import TOKEN_FEED_METADATA, channel, metadata_value, pb, pb_grpc
from services.types import Mode

log = logging.getLogger(__name__)


class DecodeService(RelayServicer, pb_grpc.DecodeServicer):
    """`relay_stub` and `kv_routes` reach the peers; None: over gRPC channels and the planned links."""

    def __init__(self, process: RoleProcess, relay_stub: Callable[[str], pb_grpc.DecodeStub] | None = None,
                 kv_routes: KvRoutes | None = None) -> None:
        self.process = process
        self.scenario = process.plan.scenario
        self.transfers = TransferTable()
        self.receiver = KvReceiver(self.transfers, process.service.listen_host, process.service.kv_port,
                                   ReceiverLimits(frame_read_s=self.scenario.transfer_timeout_s))
        self.relay = RelayLedger()
        self._relay_stubs: dict[str, pb_grpc.DecodeStub] = {}
        self._connect_relay = relay_stub or self._relay_channel
        self._channels = []
        self.handoffs = {"one-shot": 0, "catch-up": 0}
        self.relay_missing = 0  # requests main decode decoded alone: the relay never had them
        self.shipper = KvShipper(process.plan, process.service.name, kv_routes)  # the relay's KV, pdd-kvship only
        self.feeds = FeedTable()

    def _relay_stub(self, name: str) -> pb_grpc.DecodeStub:
        if name not in self._relay_stubs:
            self._relay_stubs[name] = self._connect_relay(name)
        return self._relay_stubs[name]

    def _relay_channel(self, name: str) -> pb_grpc.DecodeStub:
        ch = channel(self.process.plan.grpc_address(name, self.process.service.name))
        self._channels.append(ch)
        return pb_grpc.DecodeStub(ch)

    async def Announce(self, request, context):
        if request.abort_reason:
            self.transfers.fail(request.request_id, request.abort_reason)
            return pb.TransferAck(accepted=True)
        if self.process.draining:
            return pb.TransferAck(accepted=False, reason="draining")
        self.transfers.announce(request.request_id, request.frames, request.real_bytes, request.emulated_bytes,
                                request.first_token, request.num_tokens, request.first_token_pending)
        return pb.TransferAck(accepted=True)

    async def CacheLookup(self, request, context):
        return await self.process.cache_lookup(request, context)

    async def _submit(self, engine, seq: Sequence, context):
        try:
            return engine.submit(seq)
        except (EngineFull, ValueError) as exc:
            code = grpc.StatusCode.RESOURCE_EXHAUSTED if isinstance(exc, EngineFull) else grpc.StatusCode.INVALID_ARGUMENT
            await context.abort(code, str(exc))

    async def Tokens(self, request, context):
        feed = self.feeds.open(request.subscriber or context.peer())
        try:
            async for message in feed.messages():
                yield message
        finally:
            self.feeds.close(feed)

    async def Generate(self, request, context):
        """The request's events; its tokens go through the caller's feed when the call names an open one."""
        route = Route(self.feeds.get(metadata_value(context, TOKEN_FEED_METADATA)), request.request_id)
        async for event in route.events(self._generate(request, context, route.sink), context):
            yield event

    async def _generate(self, request, context, sink):
        """Engine TokenEvents and then the GenerateEvent carrying the stats; `sink` may take tokens first."""
        rid, received = request.request_id, await self.process.prompt_or_abort(request, context)
        prompt, hashes, fingerprint = received.ids.tolist(), received.hashes, received.fingerprint
        if not prompt or request.max_tokens < 1:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "need a prompt and max_tokens >= 1")
        if self.process.draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.process.service.name} is draining")
        try:
            engine = self.process.instance(request.instance, hashes)
        except KeyError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        stats = pb.GenerateStats(instance=self.process.instance_name(engine))
        if not request.expect_transfer:
            handle = await self._submit(engine, Sequence(request_id=rid, context=prompt, prompt_len=len(prompt),
                                                         kv_tokens=0, generate=request.max_tokens, first_position=0,
                                                         seed=request.seed, block_hashes=hashes,
                                                         fingerprint=fingerprint), context)
            async for event in self._stream(handle, stats, hit_from_engine=True, sink=sink):
                yield event
            return
        if request.relay:
            self.relay.expect(rid)
        try:
            transfer = await self.transfers.wait(rid, self.scenario.transfer_timeout_s)
        except BaseException as exc:
            self.relay.settle(rid)
            if isinstance(exc, TransferFailed):
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            raise
        finally:
            self.transfers.discard(rid)
        stats.kv_transfer_s, stats.kv_arrived_unix = transfer.seconds, transfer.finished_at
        stats.kv_real_bytes, stats.kv_emulated_bytes = transfer.real_bytes, transfer.emulated_bytes
        stats.hit_tokens = kv_from = len(prompt) - transfer.num_tokens  # the sender's view of our cache
        if request.handoff_from:
            async for event in self._take_over(request, received, prompt, engine, stats, context, sink,
                                               transfer.first_token, kv_from):
                yield event
            return
        yield TokenEvent(0, transfer.first_token, 0.0)
        if request.max_tokens == 1:
            if request.relay:  # prefill's token was the whole output: the request ends on the relay
                stats.finished_on_relay, stats.relay_tokens = True, 1
                self.relay.finished_here += 1
                self.relay.settle(rid)
            yield pb.GenerateEvent(stats=stats)
            return
        seq = Sequence(request_id=rid, context=prompt + [transfer.first_token], prompt_len=len(prompt),
                       kv_tokens=len(prompt), generate=request.max_tokens - 1, first_position=1, seed=request.seed,
                       block_hashes=hashes, fingerprint=fingerprint, kv_from=kv_from)
        try:
            handle = await self._submit(engine, seq, context)
        except BaseException:
            self.relay.settle(rid)
            raise
        if request.relay:
            self.relay.add(rid, handle, transfer.first_token, request.max_tokens, self.scenario.pdd.relay_cap)
        try:
            async for event in self._stream(handle, stats, hit_from_engine=False, relayed=request.relay, sink=sink):
                yield event
        finally:
            self.relay.remove(rid)

    async def _take_over(self, request, received, prompt, engine, stats, context, sink, first_token: int,
                         kv_from: int):
        """Main decode's part after its KV landed; `received` is the request's Prompt, `prompt` its ids as a list."""
        relay = self._relay_stub(request.handoff_from)
        try:
            if self.scenario.mode is Mode.PDD_KVSHIP:
                outcome = await take_over_by_kv(relay, engine, request, prompt, self.process.service.name,
                                                self._wait_handoff_kv, kv_from, received)
            else:
                outcome = await take_over(relay, engine, request, prompt, self.scenario.pdd, kv_from, received)
        except TransferFailed as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.NOT_FOUND:
                # The relay never decoded it (its own transfer missed the deadline): this KV is the only
                # one, so decode the whole request here, from prefill's token on.
                async for event in self._decode_alone(request, received, prompt, engine, stats, context, sink,
                                                      first_token, kv_from):
                    yield event
                return
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"handoff from {request.handoff_from} failed: "
                                                             f"{exc.details() or exc.code().name}")
        except (EngineFull, ValueError) as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        stats.handoff_mode, stats.handoff_chunks = outcome.mode.value, outcome.chunks
        stats.handed_off_at, stats.handoff_started_unix = outcome.cut, outcome.started_unix
        stats.finished_on_relay = outcome.finished_on_relay
        if outcome.handle is None:
            yield pb.GenerateEvent(stats=stats)
            return
        self.handoffs[outcome.mode.value] += 1

        def timed(event) -> bool:  # the stall ends with main decode's first token
            if type(event) is TokenEvent:
                stats.handoff_stall_s = time.time() - outcome.started_unix
                # Every later token goes straight to the feed: this check would cost each of them a call.
                outcome.handle.forward(sink)
            return sink is not None and sink(event)

        async for event in self._stream(outcome.handle, stats, hit_from_engine=False, sink=timed):
            yield event

    async def _decode_alone(self, request, received, prompt, engine, stats, context, sink, first_token: int,
                            kv_from: int):
        self.relay_missing += 1
        stats.handed_off_at = 0
        yield TokenEvent(0, first_token, 0.0)
        if request.max_tokens == 1:
            yield pb.GenerateEvent(stats=stats)
            return
        seq = Sequence(request_id=request.request_id, context=prompt + [first_token], prompt_len=len(prompt),
                       kv_tokens=len(prompt), generate=request.max_tokens - 1, first_position=1, seed=request.seed,
                       block_hashes=received.hashes, fingerprint=received.fingerprint, kv_from=kv_from)
        async for event in self._stream(await self._submit(engine, seq, context), stats, hit_from_engine=False,
                                        sink=sink):
            yield event

    async def _wait_handoff_kv(self, transfer_id: str):
        try:
            return await self.transfers.wait(transfer_id, self.scenario.transfer_timeout_s)
        finally:
            self.transfers.discard(transfer_id)

    async def _stream(self, handle, stats, hit_from_engine: bool, relayed: bool = False, sink=None):
        """Token events of one sequence, then its stats; a relayed one also ends at its handoff cut.

        With a sink, tokens go to it as each step ends and only the rest comes through here; a
        relayed sequence's sink also keeps the relay's ledger, and a stream at its cut ends when
        the handoff releases the sequence.
        """
        rid = handle.request_id
        relayed_request = self.relay.requests.get(rid) if relayed else None
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
                        self.relay.finished_here += 1
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

    async def Health(self, request, context):
        return pb.HealthReply(serving=not self.process.draining, role=self.process.service.role.value,
                              name=self.process.service.name)

    async def Stats(self, request, context):
        return pb.StatsReply(json=self.process.stats_json(self.stats()))

    async def Drain(self, request, context):
        self.process.draining = True
        return pb.Empty()

    def stats(self) -> dict:
        t = self.transfers
        return {"transfers_completed": t.completed, "transfers_failed": t.failed, "transfers_pending": t.pending,
                "kv_bytes_received": t.bytes_received, "orphan_frames": t.orphan_frames,
                "bad_frames": self.receiver.bad_frames, **self.receiver.stats(),
                "relayed": len(self.relay.requests),
                "relay_handoffs": self.relay.handoffs, "relay_finished_here": self.relay.finished_here,
                "handoffs": dict(self.handoffs), "token_feeds": len(self.feeds),
                "decoded_without_relay": self.relay_missing}

    async def close(self) -> None:
        await self.receiver.stop()
        await self.shipper.close()
        for ch in self._channels:
            await ch.close()


async def serve(plan: MeshPlan, service: ServicePlan) -> None:
    process = RoleProcess(plan, service)
    servicer = DecodeService(process)
    if service.kv_port:
        await servicer.receiver.start()
    await process.run(lambda server: pb_grpc.add_DecodeServicer_to_server(servicer, server),
                      extra_stats=servicer.stats, on_close=servicer.close)
