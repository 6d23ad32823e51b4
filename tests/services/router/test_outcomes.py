"""How a request ends at the router: one counter, one metric label and one log line per outcome."""

from __future__ import annotations

import json
import logging

import pytest
from prometheus_client import CollectorRegistry

from services.launcher.plan import build_plan
from services.router.api import ApiError
from services.router.server import Router
from services.scenario import load_scenario


@pytest.fixture
def router() -> Router:
    return Router(build_plan(load_scenario("colocated-mini")), CollectorRegistry())


def _errors(router: Router, status: str) -> float:
    return router.metrics.errors.labels(status)._value.get()


def test_a_hang_up_is_counted_cancelled_with_one_info_line_and_no_traceback(router, caplog):
    with caplog.at_level(logging.INFO, logger="services.router.outcomes"):
        router.hung_up("r1", 7)
    assert router.cancelled == 1 and router.failed == 0 and _errors(router, "client_closed") == 1
    (record,) = caplog.records
    assert record.levelno == logging.INFO and record.exc_info is None
    assert record.getMessage() == "request r1 cancelled: the client hung up after 7 tokens"


def test_errors_map_to_the_deadline_the_mesh_or_a_defect(router, caplog):
    assert router.error_of("r2", TimeoutError()).status == 504
    mesh = ApiError(503, "prefill failed")
    assert router.error_of("r2", mesh) is mesh
    try:
        raise KeyError("x")
    except KeyError as exc:
        with caplog.at_level(logging.ERROR, logger="services.router.outcomes"):
            defect = router.error_of("r2", exc)
    assert defect.status == 500 and "KeyError" in defect.message and caplog.records[0].exc_info is not None


async def test_a_failure_before_the_stream_began_is_a_real_status(router):
    reply = await router.answer_failure("r3", ApiError(429, "full", kind="rate_limit_error"), None, {"x-request-id": "r3"})
    assert reply.status == 429 and json.loads(reply.body)["error"]["type"] == "rate_limit_error"
    assert reply.headers["x-request-id"] == "r3" and router.failed == 1 and _errors(router, "429") == 1
