"""The router process: Router.run checks the pipeline's output; the handlers bound what a request may ask for."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from services.launcher.plan import build_plan
from services.roles import Token, TokenRun
from services.router.api import REQUEST_ID
from services.router.errors import json_errors
from services.router.failures import ApiError
from services.router.fanout import job_id
from services.router.pipelines import Finished, base_stats
from services.router.server import ROUTER_KEY, Router, completions
from services.rpc.messages import pb
from services.scenario import load_scenario
from services.types import Mode, Pipeline
from tests.services.router.test_pipelines import _job, _Peers, _Stream
from tests.tolerance import assert_at_most
from tests.waiting import until


def _router(events: list) -> Router:
    router = Router(build_plan(load_scenario("colocated-mini")), CollectorRegistry())
    router.peers = _Peers("colocated-mini")
    router.peers.streams["r"] = _Stream(events)
    return router


async def _items(router: Router) -> list:
    return [item async for item in router.run(_job())]


async def test_runs_in_order_pass_and_the_gauges_count_the_request_running_from_its_first_token():
    router = _router([Token(0, 5), TokenRun((Token(1, 6), Token(2, 7))), pb.GenerateStats(end_position=3)])
    items = await _items(router)
    assert type(items[1]) is TokenRun and isinstance(items[-1], Finished)
    assert router.metrics.running._value.get() == 0 and router.metrics.waiting._value.get() == 0


@pytest.mark.parametrize("events,got,expected", [
    ([TokenRun((Token(0, 5), Token(2, 7)))], 2, 1),  # a gap inside a run
    ([Token(0, 5), TokenRun((Token(1, 6), Token(1, 6)))], 1, 2),  # a repeat inside a run
    ([TokenRun((Token(1, 5), Token(2, 6)))], 1, 0),  # a run that does not start where the stream is
])
async def test_a_run_out_of_order_is_refused_at_its_first_wrong_position(events, got, expected):
    with pytest.raises(ApiError) as failure:
        await _items(_router([*events, pb.GenerateStats(end_position=3)]))
    assert failure.value.status == 502
    assert failure.value.message == f"token stream out of order: got position {got}, expected {expected}"


class _HeldJobs:
    """Router.run standing in for the mesh: each job waits for `release`, then yields its tokens."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[str] = []
        self.jobs: list = []

    async def __call__(self, job):
        self.started.append(job.request_id)
        self.jobs.append(job)
        await self.release.wait()
        for position in range(job.max_tokens):
            yield Token(position, 7)
        yield Finished(base_stats(Mode.COLOCATED, Pipeline.COLOCATED))


@pytest.fixture
async def served():
    """A router behind its real handlers, with `_HeldJobs` for the mesh; max_inflight 4."""
    router = Router(build_plan(load_scenario("colocated-mini", ["max_inflight=4"])), CollectorRegistry())
    router.run = jobs = _HeldJobs()
    app = web.Application(middlewares=[json_errors])
    app[ROUTER_KEY] = router
    app.router.add_post("/v1/completions", completions)
    async with TestClient(TestServer(app, handler_cancellation=True)) as client:  # as the router serves
        yield client, router, jobs
    assert router.inflight == 0 and not router.active_ids  # nothing outlives a request


async def _post(client, request_id: str | None = None, **fields):
    headers = {"x-request-id": request_id} if request_id else {}
    reply = await client.post("/v1/completions", json={"model": "llama3-8b", "prompt": "x", "max_tokens": 3, **fields},
                              headers=headers)
    return reply.status, await reply.json()


@pytest.mark.parametrize("fields, param, fragment", [
    ({"stop": ["Q" * 50_000, "Q0Z"], "max_tokens": 8000, "n": 8}, "stop", "at most 1000 characters"),
    ({"stop": [f"Q{i}Z" for i in range(50)], "max_tokens": 16_000}, "stop", "at most 4 stop sequences"),
    ({"prompt": ["p"] * 2000}, "prompt", "at most 128 (prompts x n)"),
    ({"prompt": ["p"] * 65, "n": 2}, "prompt", "ask for 130 choices"),
    ({"stop_token_ids": list(range(300))}, "stop_token_ids", "at most 256 items"),
    ({"n": 5}, "n", "at most 4 jobs at once (max_inflight)"),
    ({"prompt": list(range(9000)), "max_tokens": 1, "echo": True, "logprobs": 5}, "logprobs",
     "logprobs for 9001 tokens (echoed prompts and max_tokens, over 1 choices); a request may ask for at most 8192"),
    ({"prompt": ["a b"] * 2, "n": 2, "max_tokens": 2047, "echo": True, "logprobs": 0}, "logprobs", "for 8196 tokens"),
])
async def test_a_request_past_a_bound_gets_a_400_naming_it_before_any_job_starts(served, fields, param, fragment):
    client, router, jobs = served
    status, body = await _post(client, **fields)
    assert status == 400 and fragment in body["error"]["message"] and body["error"]["param"] == param, body
    assert jobs.started == [] and router.inflight == 0


async def test_the_in_flight_cap_counts_jobs_not_requests(served):
    client, router, jobs = served
    batch = asyncio.ensure_future(_post(client, prompt=["a", "b"], n=2))  # 4 jobs: the whole cap
    await until(lambda: len(jobs.started) == 4, "the batch's jobs started")
    assert router.inflight == 4
    status, body = await _post(client)
    assert status == 429 and body["error"]["message"] == "4 jobs in flight and this request asks for 1; the limit " \
                                                          "is 4 (max_inflight)"
    jobs.release.set()
    status, body = await batch
    assert status == 200 and [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    assert router.inflight == 0 and (await _post(client, n=4))[0] == 200


async def test_a_client_id_shaped_like_a_batch_job_never_meets_the_batchs_jobs(served):
    client, router, jobs = served
    batch = asyncio.ensure_future(_post(client, "X", prompt=["a", "b"]))
    await until(lambda: len(jobs.started) == 2, "the batch's jobs started")
    alone = asyncio.ensure_future(_post(client, "X-0"))  # the id the batch's first job had before
    await until(lambda: len(jobs.started) == 3, "the lone request started")
    assert jobs.started == ["X#0", "X#1", "X-0"] and router.inflight == 3
    status, body = await _post(client, "X#0")  # a job's own id is not a client's to take
    assert status == 400 and body["error"]["code"] == "invalid_request_id"
    jobs.release.set()
    assert [(await task)[0] for task in (batch, alone)] == [200, 200]


def test_no_job_id_is_a_client_id():
    for client_id in ("X", "X-0", "a.b:c_d-9", "9" * 128):
        assert REQUEST_ID.fullmatch(client_id)
        ids = [job_id(client_id, index, 3) for index in range(3)]
        assert not any(REQUEST_ID.fullmatch(i) for i in ids) and len(set(ids)) == 3


async def test_planning_a_long_stop_scan_lets_other_requests_run(served):
    """The stop attack at the bounds (4 stops of 1000 characters, n=4, 64,000 tokens): the loop never stalls."""
    client, router, jobs = served
    gaps, ticking = [], True

    async def ticker():  # the loop's gaps in CPU time: what it ran between two ticks, however loaded the machine
        last = time.process_time()
        while ticking:
            await asyncio.sleep(0.001)
            now = time.process_time()
            gaps.append(now - last)
            last = now

    tick = asyncio.ensure_future(ticker())
    planned = asyncio.ensure_future(_post(client, n=4, max_tokens=64_000, stop=["Q" * 1000, "Q0Z", "Q1Z", "Q2Z"]))
    await until(lambda: len(jobs.started) == 4, "the planned jobs started", timeout_s=30)
    ticking = False
    await tick
    assert [job.max_tokens for job in jobs.jobs] == [64_000] * 4  # no rule fired: every output was read whole
    planned.cancel()  # the client goes; its jobs end with it
    await until(lambda: router.cancelled == 1, "the hang-up counted")
    # Unyielding, the plan is one gap of about 0.4 s of CPU; a slice of it is a few milliseconds (a garbage
    # collection of the test process's heap may add tens).
    assert_at_most(max(gaps), 0.1, "the most CPU seconds the event loop ran between two ticks while it planned")


async def test_a_client_hanging_up_while_its_jobs_are_planned_frees_them_and_is_counted(served):
    client, router, jobs = served
    planned = asyncio.ensure_future(_post(client, n=4, max_tokens=16_000, stop=["Q" * 1000, "Q0Z", "Q1Z", "Q2Z"]))
    await until(lambda: router.inflight == 4, "the request holds its jobs' share of the cap")
    planned.cancel()
    await until(lambda: router.cancelled == 1, "the hang-up counted")
    assert jobs.started == [] and router.inflight == 0 and not router.active_ids
