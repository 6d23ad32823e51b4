"""The PDD pipelines at the router: P-MD, or P-RLD-MD with eager relay tokens and a handoff.

P-RLD-MD (docs/pdd.md §Request flow): the router opens main decode's stream
(which waits for the WAN transfer, then pulls the relay's ids) and the relay's
stream (which waits for the RDMA transfer, then decodes at once), and asks
prefill for the dual-path send. The client sees the relay's tokens up to the
handoff cut, then main decode's from the cut on, each position once, in order.
If the relay produces the last token first (singular traffic), main decode's
stream is cancelled and prefill stops the WAN transfer. If main decode fails
before the handoff, the relay is told to finish the request (a fallback).
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable

from services.roles import RouterPeers as Peers, token_count  # Peers: the Protocol; services/router/peers.py adapts it
from services.router.degraded import relay_alone, relay_retry, retried_on_relay
from services.router.failures import ApiError, from_a_peer
from services.router.main_stream import MainStream
from services.router.pipelines import (
    Finished, Job, Token, base_stats, cancel_on_failure, prefill_here, raise_pipeline_error, run_p_d,
    start_prefill,
)
from services.router.placement import best_decode
from services.router.prefill_target import no_prefill_reachable
from services.router.prompts import looked_up
from services.router.relay_slot import RelaySlot, load_with_dispatches
from services.router.policy import PipelinePolicy
from services.router.policy_stream import PrefillChunks
from services.router.stats import PolicyNote
from services.rpc.messages import pb
from services.types import Degraded, Mode, Pipeline, Role, RoleError



async def _lookup_relay(peers: Peers, job: Job):
    relays = peers.services(Role.RELAY_DECODE)
    try:
        replies = await asyncio.gather(*(peers.cache_lookup(r.name, job) for r in relays))
    except RoleError:
        return None, 0, None  # an unreachable relay: the policy routes P-MD
    for r in relays:
        looked_up(job, r.name)
    relay, reply = min(zip(relays, replies), key=lambda rr: load_with_dispatches(peers, rr[0], rr[1].load))
    job.instances[relay.name] = reply.instance
    return relay, reply.hit_tokens, reply.load


def policy_of(peers: Peers) -> PipelinePolicy:
    if getattr(peers, "policy", None) is None:
        scenario = peers.plan.scenario
        peers.policy = PipelinePolicy(scenario.wan, scenario.pdd)
        peers.prefill_chunks = PrefillChunks(scenario) if scenario.kv_streaming else None
    return peers.policy


async def pdd(peers: Peers, job: Job, mode: Mode) -> AsyncIterator[Token | Finished]:
    try:
        md, md_hit = await best_decode(peers, job, (Role.MAIN_DECODE,))
    except ApiError as down:
        if down.status not in (503, 504):  # unreachable, or not answering its lookup in time
            raise
        relay, relay_hit, reported_load = await _lookup_relay(peers, job)
        relay_load = None if relay is None else load_with_dispatches(peers, relay, reported_load)
        async for item in relay_alone(peers, job, mode, relay, relay_hit, relay_load, down):
            yield item
        return
    policy = policy_of(peers)
    missing = (len(job.prompt) - md_hit) * peers.kv_bytes_per_token
    chunks = peers.prefill_chunks
    parts = None if chunks is None else chunks.parts(md_hit, len(job.prompt), peers.kv_bytes_per_token)
    # A short transfer goes P-MD whatever the relay's load, so only a long one asks the relay: a lookup
    # is a gRPC call at both ends, most of what a P-MD request cost the relay (docs/mesh-measured.md §Cost of a
    # streamed token). The choice below still follows the last await, in the step that dispatches.
    relay, relay_hit, reported_load = (None, 0, None) if policy.transfer_is_short(missing, parts) else \
        await _lookup_relay(peers, job)
    # The router's dispatch count is read after the lookups' awaits and taken in the same step: a burst
    # whose lookups all ran before any of them was dispatched would otherwise all see the same idle relay.
    relay_load = None if relay is None else load_with_dispatches(peers, relay, reported_load)
    choice = policy.choose(missing, relay_load, parts)
    slot = RelaySlot(peers, relay.name, job) if choice.pipeline is Pipeline.P_RLD_MD else None
    queued_at_send = policy.in_flight_bytes
    policy.dispatched(missing)
    arrived = False

    def arrive() -> None:
        # The bytes are off the line once main decode has them, long before the request ends; counting
        # them until the end would make every later estimate see a queue that is not there.
        nonlocal arrived
        if not arrived:
            arrived = True
            policy.arrived(missing)

    failed = None
    try:
        if choice.pipeline is Pipeline.P_MD:
            source = run_p_d(peers, job, mode, md, md_hit, Pipeline.P_MD)
        else:
            source = _relay_then_main(peers, job, mode, md, md_hit, relay, relay_hit, arrive, slot)
        try:
            async for item in source:
                if not arrived and type(item) is not Finished and choice.pipeline is Pipeline.P_MD:
                    arrive()  # main decode releases token 0 only once its KV is whole
                elif isinstance(item, Finished):
                    item.stats.policy = PolicyNote(round(choice.estimate_s, 4), choice.reason)
                    if item.stats.kv_transfer_s and not item.stats.singular:
                        policy.observe(missing, item.stats.kv_transfer_s, queued_at_send, parts)
                yield item
        except ApiError as exc:
            if choice.pipeline is not Pipeline.P_MD or arrived or not retried_on_relay(exc):
                raise
            failed = exc  # nothing was sent yet: the relay may serve it whole (below)
    finally:
        arrive()
        if slot is not None:
            slot.release()
    if failed is not None:
        if relay is None:  # a short transfer skipped the relay's lookup: it is asked now, for the retry
            relay, relay_hit, reported_load = await _lookup_relay(peers, job)
        relay_load = None if relay is None else load_with_dispatches(peers, relay, reported_load)
        async for item in relay_alone(peers, relay_retry(job), mode, relay, relay_hit, relay_load,
                                      failed, "main decode failed before its first token",
                                      Degraded.MAIN_PATH_FAILED):
            yield item


async def _relay_then_main(peers: Peers, job: Job, mode: Mode, md, md_hit: int, relay, relay_hit: int,
                           arrive: Callable[[], None], slot: RelaySlot):
    stats = base_stats(mode, Pipeline.P_RLD_MD)
    stats.decode_hit_tokens = md_hit
    base = dict(request_id=job.request_id, max_tokens=job.max_tokens, seed=job.seed, expect_transfer=True)
    md_call = peers.generate(md.name, pb.GenerateRequest(**base, handoff_from=relay.name,
                                                         instance=job.instances.get(md.name, "")), job)
    relay_call = peers.generate(relay.name, pb.GenerateRequest(**base, relay=True,
                                                               instance=job.instances.get(relay.name, "")), job)
    prefill, prefill_call = start_prefill(peers, job, md.name, md_hit, relay.name, relay_hit)
    cancel_on_failure(prefill_call, md_call, relay_call)

    async def fall_back() -> None:
        stats.fallback = True
        try:
            await peers.set_limit(relay.name, job.request_id, None)
        except RoleError:
            pass  # the relay is gone too: its own stream reports the error

    main = MainStream(md_call, fall_back)
    cut = None
    ended = False
    try:
        try:
            async for event in relay_call:
                count = token_count(event)
                if count:
                    if "first_token" not in job.timeline:
                        job.mark("first_token")
                    stats.rld_tokens += count
                    yield event
                    continue
                relay_stats = event
                job.timeline["relay_kv_arrived"] = relay_stats.kv_arrived_unix
                if relay_stats.finished_on_relay:
                    break
                cut = relay_stats.handed_off_at
                main.handed_off = True
        except RoleError as relay_failure:
            if stats.rld_tokens or prefill_call.done() and prefill_call.exception() is not None \
                    or not from_a_peer(relay_failure):  # the router's token feed broke: the request's error
                raise
            # The relay never got its KV in time, but main decode may hold its own: it then decodes the
            # whole request (its handoff finds nothing at the relay), and the client sees it from token 0.
            stats.degraded, cut = Degraded.RELAY_TRANSFER_LATE.value, 0
            stats.relay_error = relay_failure.message
            main.handed_off = True
        slot.release()  # the relay's part is over: handed off, or finished there
        arrive()  # handed off: main decode had its KV; finished on the relay: the transfer stops now
        if cut is None:  # the relay produced the last token: singular traffic (or the fallback below)
            md_call.cancel()
            stats.pipeline = Pipeline.P_RLD.value if not stats.fallback else stats.pipeline
            stats.singular = not stats.fallback
            stats.wan_transfer_cancelled = await _stop_wan_transfer(peers, prefill, job)
        else:
            job.timeline["handoff_done"] = job.clock()  # the client stream switches to main decode here
            async for token in main.tokens(stats, job, cut):
                yield token
        reply = await prefill_call
        ended = True
    except (RoleError, asyncio.CancelledError) as exc:
        if stats.rld_tokens or stats.md_tokens or not no_prefill_reachable(prefill_call, exc):
            raise_pipeline_error(exc, prefill_call, "relay decode")
    finally:
        slot.release()
        md_call.cancel()
        relay_call.cancel()
        await main.close()
        if not prefill_call.done():
            prefill_call.cancel()
        elif not ended and not prefill_call.cancelled() and prefill_call.exception() is None:
            peers.abandon_transfer(prefill.name, job)  # the WAN transfer to main decode may still be running
    if not ended:  # no prefill pool answered and nothing was sent yet: main decode prefills it itself
        async for item in prefill_here(peers, job, mode, md, Degraded.NO_PREFILL.value):
            yield item
        return
    stats.prefill_hit_tokens = reply.hit_tokens
    stats.queued_s = reply.queued_s  # vLLM's queue time is the wait before prefill
    stats.degraded = stats.degraded or prefill.degraded
    stats.wan_bytes = reply.kv_bytes_emulated if not stats.singular else stats.wan_bytes
    job.timeline["prefill_done"] = reply.prefill_done_unix
    job.mark("finished")
    stats.timeline = job.timeline
    yield Finished(stats)


async def _stop_wan_transfer(peers: Peers, prefill, job: Job) -> bool:
    """The relay finished the request: prefill stops the WAN transfer nobody will read.

    The client already has every token, so a prefill that does not answer fails nothing: with it
    gone, nothing of this request is being sent either.
    """
    try:
        return await peers.cancel_transfer(prefill.name, job.request_id, "finished on relay")
    except RoleError:
        return False
