"""The control API refuses what would wedge or expose the link: server paths, absurd numbers, bad JSON."""

import asyncio
import json

import aiohttp
import pytest

from netem.config import LinkConfig
from netem.control import MAX_BODY_BYTES, ControlServer
from netem.link import UserspaceLink
from tests.netem.servers import WAIT_S, Recorder
from tests.netem.test_control import TIMEOUT, Api


@pytest.fixture
async def api():
    config = LinkConfig.symmetric(queue="256KiB")
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address, config, seed=1) as link:
        server = ControlServer(link, "127.0.0.1", 0)
        address = await server.start()
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            yield link, up, Api(session, address)
        await server.stop()


@pytest.mark.parametrize("patch, message", [
    ({"up": {"delay": float("inf")}}, "finite"),
    ({"up": {"delay": 1e308}}, "less than or equal to 600"),
    ({"up": {"delay": "601s"}}, "less than or equal to 600"),
    ({"both": {"jitter": float("nan")}}, "finite"),
    ({"up": {"rate": 0}}, "greater than 0"),
    ({"up": {"rate": "20tbit"}}, "less than or equal to"),
    ({"down": {"queue": 1e308}}, "less than or equal to"),
    ({"down": {"loss_stall": "1h"}}, "less than or equal to 60"),
    ({"up": {"window": 2**50}}, "less than or equal to"),
])
async def test_numbers_outside_their_range_are_a_400_naming_the_field(api, patch, message):
    link, _, client = api
    before = link.config
    # json.dumps writes Infinity and NaN, as a careless client would send them.
    status, reply = await client.call("PATCH", "/config", data=json.dumps(patch),
                                      headers={"Content-Type": "application/json"})
    assert status == 400 and message in reply["error"], reply
    assert link.config == before


async def test_a_partition_or_schedule_with_an_absurd_duration_is_refused(api):
    _, _, client = api
    status, reply = await client.call("POST", "/partition", data='{"mode": "blackhole", "duration": Infinity}')
    assert status == 400 and "finite" in reply["error"]
    status, reply = await client.call("POST", "/schedule", data="steps: [{at: 1e300, up: {delay: 1ms}}]")
    assert status == 400 and "at" in reply["error"]


async def test_a_schedule_is_never_read_from_a_server_path(api, tmp_path):
    link, _, client = api
    secret = tmp_path / "secret.yaml"
    secret.write_text("steps: [{at: 0, up: {delay: 5ms}}]\n")
    for body in ({"path": str(secret)}, {"path": str(tmp_path / "missing.yaml")}):
        status, reply = await client.call("POST", "/schedule", json=body)
        assert status == 400 and "reads no server files" in reply["error"]
        assert str(tmp_path) not in reply["error"]  # nothing says whether the file exists
    status, reply = await client.call("POST", "/schedule", data=f"trace: {{file: {secret}}}")
    assert status == 400 and "inline" in reply["error"]
    status, reply = await client.call("POST", "/schedule", json={"name": "../../../etc/passwd"})
    assert status == 400 and "no shipped schedule" in reply["error"]
    assert link.schedule is None and link.config.up.delay_s == 0.0


async def test_a_schedule_by_name_or_with_an_inline_trace_plays(api):
    link, _, client = api
    status, reply = await client.call("POST", "/schedule", json={"name": "kv_wander.yaml"})
    assert status == 200 and reply["running"]
    status, reply = await client.call("POST", "/schedule", json={
        "trace": {"csv": "t,delay\n0s,7ms\n", "direction": "up"}})
    assert status == 200
    down_before = link.config.down.delay_s  # as the shipped schedule left it
    await asyncio.wait_for(link.schedule.join(), WAIT_S)
    assert link.config.up.delay_s == pytest.approx(0.007) and link.config.down.delay_s == down_before


async def test_yaml_aliases_that_would_expand_a_small_body_are_refused(api):
    _, _, client = api
    bomb = "a: &a [{at: 0, up: {delay: 1ms}}]\nb: &b [*a, *a, *a, *a]\nsteps: [*b, *b, *b, *b]\n"
    status, reply = await client.call("POST", "/schedule", data=bomb)
    assert status == 400 and "alias" in reply["error"]


@pytest.mark.parametrize("method, path, body", [
    ("PATCH", "/config", "[" * 100_000 + "]" * 100_000),
    ("POST", "/partition", "{\"mode\": " * 50_000),
    ("POST", "/schedule", "[" * 100_000),
    ("GET", "/nowhere", None),
    ("DELETE", "/config", None),
    ("POST", "/schedule", "x" * (MAX_BODY_BYTES + 1)),
])
async def test_every_error_is_json(api, method, path, body):
    link, _, client = api
    status, reply = await client.call(method, path, data=body)
    assert 400 <= status < 500 and isinstance(reply, dict) and reply["error"], (status, reply)
    status, _ = await client.call("GET", "/health")
    assert status == 200


async def test_a_full_queue_held_by_a_long_delay_drains_once_the_delay_is_set_back(api):
    link, up, client = api
    status, _ = await client.call("PATCH", "/config", json={"up": {"delay": "600s"}})
    assert status == 200
    payload = bytes(range(256)) * 4096  # 1 MiB: four times the queue bound
    _, writer = await asyncio.open_connection(*link.listen_address)
    writer.write(payload)

    async def until_full() -> None:
        # The bound itself, not `reading_paused`: that is also set while the upstream leg connects.
        while link.stats()["up"]["queue_bytes"] < link.stats()["up"]["queue_limit_bytes"]:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(until_full(), WAIT_S)
    status, _ = await client.call("PATCH", "/config", json={"up": {"delay": "1ms"}})
    assert status == 200
    conn = await up.connection()
    got = await conn.wait_for_bytes(len(payload), timeout=WAIT_S)  # not 600 s later
    writer.close()
    assert got == payload
    assert link.stats()["up"]["queue_bytes"] == 0


async def test_an_infinite_size_is_a_400_not_a_500(api):
    # Found by tests/netem/test_control_fuzz.py: int(inf) raised OverflowError inside the size parser.
    link, _, client = api
    for field in ("queue", "window", "loss_unit", "initial_window"):
        status, reply = await client.call("PATCH", "/config", data=json.dumps({"up": {field: float("inf")}}))
        assert status == 400 and field in reply["error"] and "finite" in reply["error"], reply


async def test_connections_past_the_cap_get_a_json_503(api):
    from netem.control import LIMITS

    _, _, client = api
    port = int(client.base.rsplit(":", 1)[1])
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMITS.max_connections)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = await asyncio.wait_for(reader.read(), WAIT_S)
    writer.close()
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 503") and "too many" in json.loads(body)["error"]
    for _, w in held:
        w.close()
