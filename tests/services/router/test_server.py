"""Router.run: the pipeline's output checked, token by token, whether tokens come alone or in runs."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from services.launcher.plan import build_plan
from services.roles import Token, TokenRun
from services.router.failures import ApiError
from services.router.pipelines import Finished
from services.router.server import Router
from services.rpc.messages import pb
from services.scenario import load_scenario
from tests.services.router.test_pipelines import _job, _Peers, _Stream


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
