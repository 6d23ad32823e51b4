"""The router's pipelines as cores: driven over fake peers that fail with RoleErrors, as the Peers adapter does."""

from __future__ import annotations

import asyncio

import pytest

from services.launcher.plan import build_plan
from services.roles import Token, TokenRun
from services.router.failures import ApiError
from services.router.pdd import pdd
from services.router.pipelines import Finished, Job, colocated, prefill_then_decode
from services.rpc.messages import pb
from services.scenario import load_scenario
from services.types import ErrorKind, Mode, Role, RoleError


def _refused(kind: ErrorKind, details: str, code: str) -> RoleError:
    """A peer's failed call as the adapter raises it (services/rpc/errors.py `role_error`)."""
    return RoleError(kind, details, code)


class _Stream:
    """A Generate stream: `events` in order (an exception is raised), each after `gate` if one is given.

    `until_cancelled`: no events; it waits as a decode pool waits for its KV, and a cancel ends it as a
    cancelled gRPC call ends, with CancelledError.
    """

    def __init__(self, events=(), gate: asyncio.Event | None = None, until_cancelled: bool = False) -> None:
        self.events, self.gate, self.until_cancelled = list(events), gate, until_cancelled
        self.cancelled = asyncio.Event()

    def cancel(self) -> bool:
        self.cancelled.set()
        return True

    def __aiter__(self):
        return self._run()

    async def _run(self):
        if self.until_cancelled:
            await self.cancelled.wait()
            raise asyncio.CancelledError()
        if self.gate is not None:
            await self.gate.wait()
        for event in self.events:
            if isinstance(event, BaseException):
                raise event
            yield event


def _served(n: int, **stats) -> list:
    return [Token(i, 100 + i) for i in range(n)] + [pb.GenerateStats(end_position=n, instance="x-0", **stats)]


class _Peers:
    """RouterPeers (services/roles.py) over scripted answers: `streams[request_id]`, `prefills` in turn."""

    def __init__(self, preset: str, overrides=(), kv_bytes_per_token: int = 1) -> None:
        self.plan = build_plan(load_scenario(preset, list(overrides)))
        self.kv_bytes_per_token = kv_bytes_per_token
        self.streams: dict[str, _Stream] = {}
        self.prefills: list = []
        self.prefill_failed = asyncio.Event()
        self.limits: list = []
        self.limited = asyncio.Event()
        self.cancelled_transfers: list = []

    def services(self, *roles):
        return self.plan.with_role(*roles)

    def pick_prefill(self):
        return self.services(Role.PREFILL)[0]

    async def cache_lookup(self, service, job):
        return pb.CacheLookupReply(hit_tokens=0, load=0.0, instance=f"{service}-0")

    def generate(self, service, request, job):
        return self.streams.get(f"{request.request_id}@{service}") or self.streams[request.request_id]

    async def submit_prefill(self, pool, request, job):
        answer = self.prefills.pop(0)
        if isinstance(answer, BaseException):
            self.prefill_failed.set()
            raise answer
        return answer

    async def cancel_transfer(self, pool, request_id, reason):
        self.cancelled_transfers.append((pool, request_id))
        return True

    async def set_limit(self, service, request_id, limit):
        self.limits.append((service, request_id, limit))
        self.limited.set()

    def abandon_transfer(self, pool, job):
        self.cancelled_transfers.append((pool, job.request_id))


async def _run(pipeline, peers, job, mode) -> list:
    async def items() -> list:
        return [item async for item in pipeline(peers, job, mode)]
    return await asyncio.wait_for(items(), 5.0)  # a stream left waiting fails the test instead of hanging it


def _job(rid: str = "r") -> Job:
    return Job(rid, list(range(64)), 3, 0, 0.0)


@pytest.mark.parametrize("kind,code", [(ErrorKind.UNAVAILABLE, "UNAVAILABLE"), (ErrorKind.CANCELLED, "CANCELLED")])
async def test_a_colocated_pool_that_fails_gives_the_client_503_named_by_its_status(kind, code):
    peers = _Peers("colocated-mini")
    peers.streams["r"] = _Stream([_refused(kind, code, code)])
    with pytest.raises(ApiError) as failure:
        await _run(colocated, peers, _job(), Mode.COLOCATED)
    error = failure.value
    assert (error.status, error.message, error.code, error.kind) == (503, f"generation failed: {code}", code,
                                                                      "upstream_error")


async def test_a_decode_refusal_reaches_the_client_as_429_with_its_stage_and_status():
    peers = _Peers("pd-cross-mini", ["pools.decode.count=1"])
    peers.streams["r"] = _Stream([_refused(ErrorKind.EXHAUSTED, "engine full", "RESOURCE_EXHAUSTED")])
    peers.prefills = [pb.PrefillReply(request_id="r")]
    with pytest.raises(ApiError) as failure:
        await _run(prefill_then_decode, peers, _job(), Mode.PD_CROSS)
    assert failure.value.body() == {"error": {"message": "decode failed: engine full", "type": "upstream_error",
                                              "param": None, "code": "RESOURCE_EXHAUSTED"}}
    assert failure.value.status == 429


async def test_with_no_prefill_pool_reachable_the_decode_pool_prefills_the_request_itself():
    peers = _Peers("pd-cross-mini", ["pools.decode.count=1"])
    peers.streams["r"] = _Stream(until_cancelled=True)  # waits for KV that never comes
    peers.streams["r/local"] = _Stream(_served(3))
    peers.prefills = [_refused(ErrorKind.UNAVAILABLE, "failed to connect to all addresses", "UNAVAILABLE")]
    items = await _run(prefill_then_decode, peers, _job(), Mode.PD_CROSS)
    assert [t.position for t in items if type(t) is Token] == [0, 1, 2]
    assert isinstance(items[-1], Finished) and items[-1].stats.degraded == "prefill-unreachable"
    assert peers.streams["r"].cancelled.is_set()  # the failed prefill cancelled the stream waiting for its KV


async def test_a_broken_token_feed_is_the_requests_error_even_when_prefill_also_failed():
    peers = _Peers("pd-cross-mini", ["pools.decode.count=1"])
    broke = RoleError(ErrorKind.FAILED, "token feed from decode broke (ended)")  # the router's side: no status
    peers.streams["r"] = _Stream([broke], gate=peers.prefill_failed)
    peers.prefills = [_refused(ErrorKind.UNAVAILABLE, "failed to connect to all addresses", "UNAVAILABLE")]
    with pytest.raises(ApiError) as failure:
        await _run(prefill_then_decode, peers, _job(), Mode.PD_CROSS)
    # Not a local prefill, and not "prefill failed": the feed's own message, as before the pipelines were cores.
    assert (failure.value.status, failure.value.message, failure.value.code) == \
        (502, "token feed from decode broke (ended)", None)


async def test_a_p_md_request_whose_main_decode_fails_before_token_0_is_served_by_the_relay():
    peers = _Peers("pdd-mini")  # one byte per token: a short transfer, so P-MD
    peers.streams["r"] = _Stream([_refused(ErrorKind.UNAVAILABLE, "KV transfer failed", "UNAVAILABLE")])
    peers.streams["r/relay"] = _Stream(_served(3))
    peers.prefills = [pb.PrefillReply(request_id="r"), pb.PrefillReply(request_id="r/relay")]
    items = await _run(pdd, peers, _job(), Mode.PDD)
    stats = items[-1].stats
    assert [t.position for t in items if type(t) is Token] == [0, 1, 2]
    assert (stats.pipeline, stats.degraded, stats.fallback, stats.rld_tokens) == ("P-RLD", "main-decode-failed",
                                                                                   True, 3)
    assert stats.degraded_cause == "decode failed: KV transfer failed"


async def test_when_main_decode_fails_before_the_handoff_the_relay_is_told_to_finish_the_request():
    peers = _Peers("pdd-mini", kv_bytes_per_token=1 << 24)  # 1 GiB over the WAN, an idle relay: P-RLD-MD
    peers.streams["r@main-decode"] = _Stream([_refused(ErrorKind.UNAVAILABLE, "main decode restarted", "UNAVAILABLE")])
    # The relay finishes the request only once its cap is lifted (SetLimit -1).
    peers.streams["r@relay-decode"] = _Stream(_served(3, finished_on_relay=True), gate=peers.limited)
    peers.prefills = [pb.PrefillReply(request_id="r")]
    items = await _run(pdd, peers, _job(), Mode.PDD)
    stats = items[-1].stats
    assert peers.limits == [("relay-decode", "r", None)] and stats.fallback and stats.pipeline == "P-RLD-MD"
    assert [t.position for t in items if type(t) is Token] == [0, 1, 2] and stats.rld_tokens == 3
    assert ("prefill", "r") in peers.cancelled_transfers  # the WAN transfer to main decode is stopped


async def test_a_run_of_tokens_passes_through_whole_and_counts_as_its_tokens():
    peers = _Peers("colocated-mini")
    run = TokenRun(Token(i, 100 + i) for i in (1, 2))
    peers.streams["r"] = _Stream([Token(0, 100), run, pb.GenerateStats(end_position=3, instance="x-0")])
    job = _job()
    items = await _run(colocated, peers, job, Mode.COLOCATED)
    assert items[1] is run and items[-1].stats.md_tokens == 3 and "first_token" in job.timeline
