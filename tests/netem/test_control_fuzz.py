"""The link control API against arbitrary bodies: a JSON 200 or 4xx, a config that stays in range, a live link.

A real link and control server run on their own event loop in a thread; hypothesis sends bodies
over real HTTP, as the router's fuzz tests do (tests/services/router/test_api_fuzz.py).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import socket
import threading

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from netem.config import MAX_BYTES, MAX_DELAY_S, MAX_RATE_BPS, DirectionConfig
from netem.control import ControlServer
from netem.link import UserspaceLink
from tests.netem.servers import WAIT_S, Echo

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])

numbers = (st.integers(-2**70, 2**70) | st.floats() | st.sampled_from(["1e308", "Infinity", "-0", "1e-320"])
           | st.builds(lambda n, u: f"{n}{u}", st.floats(allow_nan=True), st.sampled_from(
               ["ms", "s", "us", "h", "gbit", "tbit", "kbit", "MiB", "TiB", "%", ""])))
json_values = st.recursive(st.none() | st.booleans() | numbers | st.text(max_size=12),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=3), max_leaves=8)
fields = st.dictionaries(st.sampled_from(list(DirectionConfig.model_fields) + ["speed"]), numbers | json_values,
                         max_size=4)
patches = st.fixed_dictionaries({}, optional={"up": fields, "down": fields, "both": fields}) | json_values
partitions = st.fixed_dictionaries({}, optional={
    "mode": st.sampled_from(["blackhole", "reject", "sideways"]) | json_values,
    "direction": st.sampled_from(["up", "down", "both", "left"]) | json_values, "duration": numbers | json_values})
steps = st.lists(st.fixed_dictionaries({"at": numbers}, optional={"up": fields, "both": fields,
                                                                  "partition": partitions, "heal": json_values}),
                 max_size=3)
schedules = st.fixed_dictionaries({}, optional={"steps": steps | json_values, "loop": json_values,
                                                "period": numbers, "trace": json_values,
                                                "name": st.text(max_size=20), "path": st.text(max_size=20)})


class _LinkThread:
    """An echo upstream, a link and its control API on one event loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),), daemon=True)

    async def _main(self) -> None:
        async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, seed=3) as link:
            server = ControlServer(link, "127.0.0.1", 0)
            self.link, self.control = link, await server.start()
            self.ready.set()
            await self.stop.wait()
            await server.stop()

    def __enter__(self) -> _LinkThread:
        self.thread.start()
        assert self.ready.wait(WAIT_S)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(WAIT_S)


@pytest.fixture(scope="module")
def served():
    with _LinkThread() as served:
        yield served


def _call(served: _LinkThread, method: str, path: str, body: bytes | None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(*served.control, timeout=WAIT_S)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        assert reply.getheader("Content-Type", "").startswith("application/json")
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def _assert_sane(served: _LinkThread) -> None:
    for side in ("up", "down"):
        config = getattr(served.link.config, side)
        for name in ("delay_s", "jitter_s", "loss_stall_s", "correlation", "loss"):
            assert math.isfinite(getattr(config, name)) and 0 <= getattr(config, name) <= MAX_DELAY_S
        assert config.rate_bps is None or 0 < config.rate_bps <= MAX_RATE_BPS
        assert 0 < config.queue_bytes <= MAX_BYTES
    with socket.create_connection(served.link.listen_address, timeout=WAIT_S) as sock:
        sock.sendall(b"ping")
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(WAIT_S)
        assert sock.recv(4) == b"ping"  # the link still carries bytes (the link is reset between cases)


def _answered(status: int, reply: dict) -> None:
    assert status == 200 or (400 <= status < 500 and isinstance(reply.get("error"), str) and reply["error"]), \
        (status, reply)


def _reset(served: _LinkThread) -> None:
    _call(served, "DELETE", "/schedule", None)  # first: a running schedule would change the link again
    _call(served, "DELETE", "/partition", None)
    status, _ = _call(served, "PATCH", "/config", json.dumps({"both": {"delay": 0, "jitter": 0, "rate": None,
                                                                       "loss": 0, "window": None}}).encode())
    assert status == 200


def _send_and_check(served: _LinkThread, method: str, path: str, body: bytes) -> None:
    _answered(*_call(served, method, path, body))
    _reset(served)
    _assert_sane(served)


@FUZZ
@given(body=patches)
def test_arbitrary_config_patches(served, body):
    _send_and_check(served, "PATCH", "/config", json.dumps(body).encode())


@FUZZ
@given(body=partitions)
def test_arbitrary_partitions(served, body):
    _send_and_check(served, "POST", "/partition", json.dumps(body).encode())


@FUZZ
@given(body=schedules, as_yaml=st.booleans())
def test_arbitrary_schedules(served, body, as_yaml):
    text = yaml.safe_dump(body) if as_yaml else json.dumps(body)
    _send_and_check(served, "POST", "/schedule", text.encode())


@FUZZ
@given(data=st.binary(max_size=512), method=st.sampled_from(["PATCH /config", "POST /partition", "POST /schedule",
                                                             "DELETE /partition", "POST /reset", "PUT /config"]))
def test_arbitrary_bytes(served, data, method):
    verb, path = method.split(" ")
    _send_and_check(served, verb, path, data)
