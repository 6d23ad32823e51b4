"""Run one request through the mesh: colocated, or P then D (the PD baselines).

Each pipeline is an async generator of `Token` values followed by one
`Finished` carrying the `pdd` stats (docs/mesh.md §Request flow). The decode
stream is opened before prefill starts so the decode side is waiting when the
KV announce arrives; every step runs under the request's deadline. The
pipelines are cores: they reach the pools through `RouterPeers` (services/roles.py,
adapted by services/router/peers.py), meet a pool's failure as a RoleError and
fail the request with its ApiError (services/router/failures.py); their clock
is the job's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, NoReturn

from services.scenario.plan import ServicePlan
from services.engine.tokens import prompt_fingerprint
# Peers: the Protocol; services/router/peers.py adapts it
from services.roles import DecodeStream, RouterPeers as Peers, Token, token_count
from services.router.failures import ApiError, api_error, from_a_peer
from services.router.intake import PromptIds
from services.router.placement import best_decode, best_prefill
from services.router.prefill_target import PrefillTarget, no_prefill_reachable, prefill_any
from services.router.stats import PddStats
from services.rpc.messages import pb
from services.types import Clock, Degraded, Mode, Pipeline, Role, RoleError, unix_time


@dataclass
class Finished:
    stats: PddStats

    @property
    def pdd(self) -> dict[str, Any]:
        """The response's `pdd` object (docs/mesh.md)."""
        return self.stats.as_json()


@dataclass
class Job:
    request_id: str
    prompt: PromptIds  # a list of ids already known to be valid is taken too
    max_tokens: int
    seed: int
    received_unix: float
    timeline: dict[str, float] = field(default_factory=dict)
    # The instance each looked-up decode service named: its cache sized the transfer, so it decodes.
    instances: dict[str, str] = field(default_factory=dict)
    # Services whose lookup left the prompt there, and under which request id (services/router/prompts.py).
    # A retry under another id (dataclasses.replace) shares it: each held prompt is taken once.
    holders: dict[str, str] = field(default_factory=dict)
    fingerprint: int | None = None  # the prompt's (services/engine/tokens.py), computed once per request
    clock: Clock = unix_time  # stamps the timeline

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, PromptIds):
            self.prompt = PromptIds.of(self.prompt)
        if self.fingerprint is None:
            self.fingerprint = prompt_fingerprint(self.prompt.ids)

    def mark(self, stage: str) -> None:
        self.timeline[stage] = self.clock()


def base_stats(mode: Mode, pipeline: Pipeline) -> PddStats:
    return PddStats(mode=mode.value, pipeline=pipeline.value)


async def stream_decode(stream: DecodeStream, job: Job, stats: PddStats) -> AsyncIterator[Token]:
    """A decode stream's tokens, counted as main (or only) decode's; its final stats go into `stats`."""
    async for item in stream:
        count = token_count(item)
        if count:
            if "first_token" not in job.timeline:
                job.mark("first_token")
            stats.md_tokens += count
            yield item
        else:
            s = item
            stats.decode_hit_tokens = s.hit_tokens
            stats.queued_s = s.queued_s  # colocated: the only queue; after a prefill its queue time replaces it
            stats.kv_transfer_s = s.kv_transfer_s
            if s.kv_arrived_unix:
                job.timeline["kv_arrived"] = s.kv_arrived_unix
            stats.decode_instance = s.instance


def colocated(peers: Peers, job: Job, mode: Mode) -> AsyncIterator[Token | Finished]:
    # prefill_here itself, not a generator around it: every layer of generators costs each token a resume
    return prefill_here(peers, job, mode, None)


async def prefill_here(peers: Peers, job: Job, mode: Mode, service: ServicePlan | None,
                       degraded: str | None = None) -> AsyncIterator[Token | Finished]:
    """`service` prefills the prompt itself and decodes it: the colocated pool, or a decode pool while
    no prefill pool answers (a degraded mode, services/router/degraded.py).

    `service` None: the colocated pool holding the longest prefix of the prompt.
    """
    if service is None:
        service, _ = await best_decode(peers, job, (Role.COLOCATED,))
    stats = base_stats(mode, Pipeline.COLOCATED)
    # A degraded retry runs under its own id: the cancelled streams of the first attempt may still be
    # unwinding at the router's feed and at the pool, and must not take this stream's tokens.
    rid = job.request_id if degraded is None else f"{job.request_id}/local"
    request = pb.GenerateRequest(request_id=rid, max_tokens=job.max_tokens, seed=job.seed, expect_transfer=False,
                                 instance=job.instances.get(service.name, ""))
    try:
        async for token in stream_decode(peers.generate(service.name, request, job), job, stats):
            yield token
    except RoleError as exc:
        raise api_error(exc, "generation" if degraded is None else f"generation at {service.name}") from exc
    stats.prefill_hit_tokens = stats.decode_hit_tokens
    stats.degraded = degraded
    job.mark("finished")
    stats.timeline = job.timeline
    yield Finished(stats)


def start_prefill(peers: Peers, job: Job, target: str, hit: int, secondary: str = "",
                  secondary_hit: int = 0) -> tuple[PrefillTarget, asyncio.Future]:
    request = pb.PrefillRequest(  # its prompt fields are added for the pool it goes to (prefill_any)
        request_id=job.request_id, seed=job.seed, kv_target=target,
        receiver_hit_tokens=hit, kv_target_secondary=secondary, secondary_hit_tokens=secondary_hit)
    job.mark("prefill_sent")
    prefill = PrefillTarget(peers.pick_prefill())
    return prefill, asyncio.ensure_future(_prefill(peers, request, job, prefill))


async def _prefill(peers: Peers, request: pb.PrefillRequest, job: Job, prefill: PrefillTarget) -> pb.PrefillReply:
    """Prefill on the pool holding the longest prefix (several pools), passing an unreachable one over."""
    prefill.service = await best_prefill(peers, job, prefill.service)
    return await prefill_any(peers, request, job, prefill)


def cancel_on_failure(call: asyncio.Future, *streams) -> None:
    """A failed prefill cancels the streams waiting for its KV instead of letting them time out."""
    def _done(done: asyncio.Future) -> None:
        if not done.cancelled() and done.exception() is not None:
            for stream in streams:
                stream.cancel()
    call.add_done_callback(_done)


def raise_pipeline_error(exc: BaseException, prefill_call: asyncio.Future, stage: str) -> NoReturn:
    """Raise a pipeline's failure as the client should see it.

    A failed prefill explains whatever the decoder reported after it, so it is named first, unless
    the router's own token feed broke (it names itself); a cancellation (the client left, or the
    request deadline) stays a cancellation.
    """
    if isinstance(exc, RoleError) and not from_a_peer(exc):
        raise api_error(exc, stage) from exc
    failure = prefill_call.exception() if prefill_call.done() and not prefill_call.cancelled() else None
    if failure is not None:
        raise api_error(failure, "prefill") from exc
    if isinstance(exc, asyncio.CancelledError):
        raise exc
    raise api_error(exc, stage) from exc


def prefill_then_decode(peers: Peers, job: Job, mode: Mode) -> AsyncIterator[Token | Finished]:
    # run_p_d itself, not a generator around it: every layer of generators costs each token a resume
    return run_p_d(peers, job, mode, None, 0, Pipeline.P_D)


async def run_p_d(peers: Peers, job: Job, mode: Mode, decode: ServicePlan | None, hit: int,
                  pipeline: Pipeline) -> AsyncIterator[Token | Finished]:
    """Prefill, ship the KV the receiver lacks, decode there: the PD baselines and PDD's P-MD.

    `decode` None: the decode pool holding the longest prefix of the prompt, and its `hit`.
    """
    if decode is None:
        decode, hit = await best_decode(peers, job, (Role.DECODE,))
    stats = base_stats(mode, pipeline)
    gen = peers.generate(decode.name, pb.GenerateRequest(
        request_id=job.request_id, max_tokens=job.max_tokens, seed=job.seed, expect_transfer=True,
        instance=job.instances.get(decode.name, "")), job)
    prefill, prefill_call = start_prefill(peers, job, decode.name, hit)
    cancel_on_failure(prefill_call, gen)
    landed = False
    try:
        async for token in stream_decode(gen, job, stats):
            yield token
        reply = await prefill_call
        landed = True
    except (RoleError, asyncio.CancelledError) as exc:
        if stats.md_tokens or not no_prefill_reachable(prefill_call, exc):
            raise_pipeline_error(exc, prefill_call, "decode")
    finally:
        gen.cancel()
        if not prefill_call.done():
            prefill_call.cancel()
        elif not landed and not prefill_call.cancelled() and prefill_call.exception() is None:
            peers.abandon_transfer(prefill.name, job)
    if not landed:  # no prefill pool answered and nothing was sent yet: the decode pool prefills it itself
        async for item in prefill_here(peers, job, mode, decode, Degraded.NO_PREFILL.value):
            yield item
        return
    stats.prefill_hit_tokens = reply.hit_tokens
    stats.queued_s = reply.queued_s  # vLLM's queue time is the wait before prefill
    stats.degraded = prefill.degraded
    job.timeline["prefill_done"] = reply.prefill_done_unix
    if peers.plan.link(prefill.name, decode.name).kind == "wan":
        stats.wan_bytes = reply.kv_bytes_emulated
    job.mark("finished")
    stats.timeline = job.timeline
    yield Finished(stats)


def pipeline_for(mode: Mode):
    if mode is Mode.COLOCATED:
        return colocated
    if mode in (Mode.PD_INTRA, Mode.PD_CROSS):
        return prefill_then_decode
    if mode in (Mode.PDD, Mode.PDD_KVSHIP):
        from services.router.pdd import pdd
        return pdd
    raise ApiError(501, f"mode {mode.value} is not served by this router", kind="server_error")
