"""The page's routes on a real router app: the page and assets from the package alone, bounded data, no token."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from services.launcher.plan import build_plan
from services.router.dashboard import routes
from services.credentials import LINK_TOKEN_ENV, LINK_TOKEN_FILE_ENV
from services.router.dashboard.sampler import EVENTS, HISTORY
from services.router.server import ROUTER_KEY, build_app
from services.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[4]
STATIC = ROOT / "services" / "router" / "dashboard" / "static"
TOKEN = "s3cret-link-token"


@pytest.fixture
async def client(monkeypatch, tmp_path):
    # The router's environment as `pdd-emu up` makes it: the path of the links' token file, not the token.
    (tmp_path / "link-token").write_text(TOKEN)
    monkeypatch.delenv(LINK_TOKEN_ENV, raising=False)
    monkeypatch.setenv(LINK_TOKEN_FILE_ENV, str(tmp_path / "link-token"))
    async with TestClient(TestServer(build_app(build_plan(load_scenario("pdd-mini"))))) as c:
        yield c


async def test_the_sampler_reads_the_links_with_the_token_from_the_file(client):
    assert client.server.app[routes.SAMPLER].link_token == TOKEN


async def test_the_page_loads_only_assets_the_router_serves(client):
    reply = await client.get("/dashboard")
    assert reply.status == 200 and reply.content_type == "text/html"
    page = await reply.text()
    references = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert references and all(ref.startswith("/dashboard/static/") or ref == "data:," for ref in references)
    for ref in references[1:] if references[0] == "data:," else references:
        asset = await client.get(ref)
        assert asset.status == 200 and asset.content_type in ("text/css", "text/javascript"), ref
    # No CDN: the page's own files name no other host, and uPlot only its home in its licence banner.
    for name in ("index.html", "dashboard.js", "dashboard.css"):
        assert not re.search(r"https?://", (STATIC / name).read_text()), name
    assert re.findall(r"https?://\S+", (STATIC / "uPlot.iife.min.js").read_text()) == \
        ["https://github.com/leeoniya/uPlot"]


def test_every_static_file_ships_in_the_package():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["services.router.dashboard"]
    for path in STATIC.iterdir():
        assert any(fnmatch(f"static/{path.name}", pattern) for pattern in patterns), path.name


@pytest.mark.parametrize("path", ["/dashboard/static/server.py", "/dashboard/static/..%2Fsampler.py"])
async def test_only_the_named_assets_are_served(client, path):
    reply = await client.get(path)
    assert reply.status == 404 and "error" in await reply.json()


@pytest.mark.parametrize("since", ["-1", "x", "1" * 13, "²"])
async def test_a_bad_since_is_a_clear_400(client, since):
    reply = await client.get("/dashboard/data", params={"since": since})
    body = await reply.json()
    assert reply.status == 400 and body["error"]["param"] == "since"
    assert "last sample number" in body["error"]["message"]


async def test_the_data_is_bounded_and_never_carries_the_link_token(client):
    sampler = client.app[routes.SAMPLER]
    for _ in range(HISTORY + 20):  # nothing listens on the planned links: every read fails, said once per link
        await sampler.tick()
    reply = await client.get("/dashboard/data")
    data = await reply.json()
    assert [s["seq"] for s in data["samples"]] == list(range(21, HISTORY + 21))
    assert len(data["events"]) == 2 <= EVENTS and all("does not answer" in e["text"] for e in data["events"])
    assert data["meta"]["links"] == [{"name": "prefill-to-relay-decode", "kind": "rdma", "src": "prefill",
                                      "dst": "relay-decode"},
                                     {"name": "prefill-to-main-decode", "kind": "wan", "src": "prefill",
                                      "dst": "main-decode"}]
    since = await client.get("/dashboard/data", params={"since": str(HISTORY + 18)})
    assert [s["seq"] for s in (await since.json())["samples"]] == [HISTORY + 19, HISTORY + 20]
    bodies = [await (await client.get(path)).text() for path in
              ("/dashboard", "/dashboard/data", *(f"/dashboard/static/{name}" for name in routes.ASSETS))]
    assert not any(TOKEN in body for body in bodies)


async def test_a_sample_has_the_requests_of_its_window(client):
    sampler, router = client.app[routes.SAMPLER], client.app[ROUTER_KEY]
    await sampler.tick()
    pdd = {"mode": "pdd", "pipeline": "P-RLD-MD", "wan_bytes": 0, "kv_transfer_s": 0.0, "rld_tokens": 30,
           "md_tokens": 70, "prefill_hit_tokens": 0, "decode_hit_tokens": 0}
    for ttft, degraded in ((0.5, None), (1.5, "main-decode-failed")):
        router.metrics.finished({**pdd, "degraded": degraded}, 1000, 100, ttft_s=ttft, e2e_s=ttft + 99 * 0.02)
        router.completed += 1
    await sampler.tick()
    data = await (await client.get("/dashboard/data")).json()
    sample = data["samples"][-1]
    assert "1 answer degraded since the last sample: 1 main-decode-failed" in [e["text"] for e in data["events"]]
    assert data["now"]["degraded"] == {"main-decode-failed": 1}
    assert sample["requests"] == 2 and sample["ttft"]["p50"] == pytest.approx(1.0)
    assert sample["tpot"]["p99"] == pytest.approx(0.02) and sample["sla_met"] == 1.0
    assert sample["rps"] > 0 and sample["rld_share"] == pytest.approx(0.3)
    assert sample["pipelines"] == {"P-RLD-MD": 2}
