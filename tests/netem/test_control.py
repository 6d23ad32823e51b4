"""The control API over real HTTP: read, change, schedule, partition, reset, auth."""

import asyncio
import hashlib
import os

import aiohttp
import pytest

from netem.config import ConfigError
from netem.control import ControlServer
from netem.link import UserspaceLink
from tests.netem.servers import WAIT_S, Echo, Recorder, read_all
from tests.tolerance import assert_close

TIMEOUT = aiohttp.ClientTimeout(total=WAIT_S)


class Api:
    def __init__(self, session: aiohttp.ClientSession, address: tuple[str, int], token: str | None = None) -> None:
        self.session = session
        self.base = f"http://127.0.0.1:{address[1]}"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def call(self, method: str, path: str, **kw) -> tuple[int, object]:
        headers = {**self.headers, **kw.pop("headers", {})}
        async with self.session.request(method, self.base + path, headers=headers, **kw) as resp:
            body = await resp.json() if resp.content_type == "application/json" else await resp.text()
            return resp.status, body


@pytest.fixture
async def api():
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, seed=1) as link:
        server = ControlServer(link, "127.0.0.1", 0)
        address = await server.start()
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            yield link, Api(session, address)
        await server.stop()


async def test_health_config_and_stats(api):
    link, client = api
    status, health = await client.call("GET", "/health")
    assert status == 200 and health["status"] == "ok"
    assert health["listen"].endswith(f":{link.listen_address[1]}")
    status, config = await client.call("GET", "/config")
    assert status == 200 and set(config) == {"up", "down"} and config["up"]["delay"] == 0.0
    status, stats = await client.call("GET", "/stats")
    assert status == 200
    for key in ("bytes", "chunks", "queue_bytes", "connections"):
        assert isinstance(stats["up"][key], int) and isinstance(stats["down"][key], int)


async def test_patch_changes_the_live_link(api):
    link, client = api
    status, config = await client.call("PATCH", "/config", json={"up": {"delay": "20ms", "rate": "1gbit"}, "both": {"jitter": "1ms"}})
    assert status == 200
    assert config["up"]["delay"] == pytest.approx(0.02) and config["up"]["rate"] == 1e9
    assert config["down"]["jitter"] == pytest.approx(0.001) and config["down"]["delay"] == 0.0
    assert link.config.up.delay_s == pytest.approx(0.02)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"up": {"delay": "fast"}}, "duration"),
        ({"up": {"speed": "1gbit"}}, "unknown field"),
        ({"sideways": {}}, "unknown key"),
        ({"up": {"loss": "150%"}}, "outside"),
        ([1, 2], "object"),
    ],
)
async def test_bad_patch_is_a_400_and_the_link_keeps_serving(api, body, message):
    link, client = api
    before = link.config
    status, reply = await client.call("PATCH", "/config", json=body)
    assert status == 400 and message in reply["error"]
    assert link.config == before
    reader, writer = await asyncio.open_connection(*link.listen_address)
    writer.write(b"still here")
    writer.write_eof()
    assert await read_all(reader) == b"still here"
    writer.close()


async def test_body_that_is_not_json_is_a_400(api):
    _, client = api
    status, reply = await client.call("PATCH", "/config", data=b"{nope", headers={"Content-Type": "application/json"})
    assert status == 400 and "JSON" in reply["error"]


async def test_schedule_from_text_and_by_name_then_delete(api):
    link, client = api
    status, reply = await client.call("POST", "/schedule", data="steps: [{at: 0, down: {delay: 3ms}}]\n")
    assert status == 200
    await asyncio.wait_for(link.schedule.join(), WAIT_S)
    assert link.config.down.delay_s == pytest.approx(0.003)
    status, reply = await client.call("POST", "/schedule", json={"name": "kv_wander.yaml"})
    assert status == 200 and reply["running"]
    status, reply = await client.call("GET", "/schedule")
    assert reply["running"]
    status, reply = await client.call("DELETE", "/schedule")
    assert status == 200 and reply["stopped"] is True
    status, reply = await client.call("POST", "/schedule", data="steps: [{at: 0, up: {delay: soon}}]")
    assert status == 400 and "duration" in reply["error"]


async def test_partition_and_reset_endpoints(api):
    link, client = api
    reader, writer = await asyncio.open_connection(*link.listen_address)
    writer.write(b"1")
    await asyncio.wait_for(reader.readexactly(1), WAIT_S)
    status, stats = await client.call("POST", "/partition", json={"mode": "blackhole", "direction": "up", "duration": "5s"})
    assert status == 200 and stats["up"]["partition"] == "blackhole" and stats["down"]["partition"] is None
    assert_close(stats["up"]["partition_left_s"], 5.0, rel=0.2, what="partition time left")
    status, stats = await client.call("DELETE", "/partition")
    assert stats["up"]["partition"] is None
    status, reply = await client.call("POST", "/partition", json={"mode": "sideways"})
    assert status == 400
    status, reply = await client.call("POST", "/reset")
    assert status == 200 and reply["reset"] == 1
    with pytest.raises(ConnectionResetError):
        await read_all(reader)
    writer.close()


async def test_metrics_are_prometheus_text_from_the_links_own_registry(api):
    link, client = api
    reader, writer = await asyncio.open_connection(*link.listen_address)
    writer.write(b"abc")
    writer.write_eof()
    await read_all(reader)
    writer.close()
    status, text = await client.call("GET", "/metrics")
    assert status == 200
    assert 'pdd_netem_delivered_bytes_total{direction="up",link="link"} 3.0' in text
    assert "pdd_netem_queue_bytes" in text
    assert "python_gc" not in text  # not the global registry


async def test_a_named_link_labels_its_metrics_with_its_name():
    async with Echo() as echo, UserspaceLink(("127.0.0.1", 0), echo.address, seed=1) as link:
        server = ControlServer(link, "127.0.0.1", 0, name="wan")
        address = await server.start()
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            status, text = await Api(session, address).call("GET", "/metrics")
        await server.stop()
    assert status == 200 and 'link="wan"' in text and 'link="link"' not in text


async def test_reconfigure_over_http_in_flight_keeps_every_byte(api):
    link, client = api
    payload = os.urandom(6 << 20)
    reader, writer = await asyncio.open_connection(*link.listen_address)

    async def send() -> None:
        for i in range(0, len(payload), 1 << 18):
            writer.write(payload[i : i + (1 << 18)])
            await asyncio.wait_for(writer.drain(), WAIT_S)
        writer.write_eof()

    sender = asyncio.ensure_future(send())
    receiver = asyncio.ensure_future(read_all(reader, timeout=30))
    for i in range(10):
        status, _ = await client.call("PATCH", "/config", json={"both": {"delay": f"{i % 4 * 5}ms", "rate": f"{400 + 100 * i}mbit"}})
        assert status == 200
    await asyncio.wait_for(sender, WAIT_S)
    got = await receiver
    writer.close()
    assert hashlib.sha256(got).digest() == hashlib.sha256(payload).digest()


async def test_off_loopback_needs_a_token_and_checks_it():
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address) as link:
        with pytest.raises(ConfigError, match="token"):
            ControlServer(link, "0.0.0.0", 0)
        server = ControlServer(link, "0.0.0.0", 0, token="s3cret")
        address = await server.start()
        try:
            async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
                for token in (None, "wrong", "s3cret2", "S3CRET"):
                    status, reply = await Api(session, address, token).call("GET", "/config")
                    assert status == 401, token
                status, reply = await Api(session, address, None).call("PATCH", "/config", json={"up": {"delay": "9s"}})
                assert status == 401 and link.config.up.delay_s == 0.0
                status, reply = await Api(session, address, "s3cret").call("GET", "/config")
                assert status == 200
                # Liveness alone is open: a keeper probes it without credentials, and it changes nothing.
                status, reply = await Api(session, address, None).call("GET", "/health")
                assert status == 200 and reply["status"] == "ok"
                status, reply = await Api(session, address, None).call("POST", "/health")
                assert status == 401
        finally:
            await server.stop()
