"""The live page in a real headless Chromium, against a real pdd-mini mesh started by `pdd-emu up`.

The page is opened at the address `up` printed; Playwright drives Debian's
chromium (.ci/run installs it) over the DevTools protocol. Every wait is
`wait_for_function`, polled in the page against a deadline. Under load, the
figures must move; a WAN change made through the link's control API must
show in the link's figures and as an event, and so must a link process killed
and restarted by its keeper; a page open while the router restarts must start
over with the new one. The screenshots must have no
overlapping or clipped text and legends that match what is drawn.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
from pathlib import Path

import aiohttp
import pytest

from netem.client import ControlClient
from services.credentials import link_token
from services.launcher.processes import STATUS_DIR
from services.scenario.link_config import real_fields
from services.scenario.plan import MeshPlan
from tests.integration.mesh import mesh_up
from tests.integration.page_checks import LAYOUT, legend_problems

playwright = pytest.importorskip("playwright.async_api", reason="needs the test extras (playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync"]
DEADLINE_MS = 60_000
TRAFFIC_S = 90.0  # the most the traffic runs; the test stops it sooner
WAN_LINK = "prefill-to-main-decode"


async def _traffic(router: str, stop: asyncio.Event) -> int:
    """Four clients in a loop: fresh prompts (KV over the WAN, some relayed) and short outputs."""
    rng = random.Random(58)
    finished = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        async def client() -> None:
            nonlocal finished
            while not stop.is_set():
                prompt = [rng.randrange(50_000) for _ in range(rng.choice((2_000, 8_000)))]
                body = {"model": "llama3-8b", "prompt": prompt, "max_tokens": rng.choice((16, 64))}
                async with http.post(f"{router}/v1/completions", json=body) as reply:
                    assert reply.status == 200, await reply.text()
                finished += 1

        async with asyncio.timeout(TRAFFIC_S):
            await asyncio.gather(*(client() for _ in range(4)))
    return finished


def _kill(run_dir: Path, name: str) -> None:
    """SIGKILL the process `name`'s keeper runs (checked to be the command it started), as a crash would."""
    status = json.loads((run_dir / STATUS_DIR / f"{name}.json").read_text())
    cmdline = Path(f"/proc/{status['child_pid']}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    assert cmdline == [part.encode() for part in status["cmd"]]
    os.kill(status["child_pid"], signal.SIGKILL)


def _last(selector: str, index: int) -> str:
    """The last value the chart at `selector` drew for its series `index` (0 is the first y series)."""
    return f"JSON.parse(document.querySelector({selector!r}).dataset.last || '[]')[{index}]"


async def test_the_live_page_follows_load_a_wan_change_and_restarts(tmp_path: Path):
    with mesh_up("pdd-mini", tmp_path / "mesh") as printed:
        url = printed["dashboard"].split()[0]
        router = printed["router"]
        assert url == f"{router}/dashboard"
        plan = MeshPlan.load(tmp_path / "mesh" / "plan.json")
        async with playwright.async_playwright() as driver:
            browser = await driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            problems: list[str] = []
            router_down = asyncio.Event()  # from then on, a refused connection is the restart's, expected

            def console(message) -> None:
                if message.type == "error" and not (router_down.is_set() and "CONNECTION_REFUSED" in message.text):
                    problems.append(f"console: {message.text}")

            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("console", console)
            page.on("request", lambda r: problems.append(f"left the router: {r.url}")
                    if not r.url.startswith(router) else None)
            await page.goto(url)
            await page.wait_for_function("document.querySelector('#status').classList.contains('live')",
                                         timeout=DEADLINE_MS)
            assert await page.locator("#scenario").inner_text() == "pdd-mini (pdd, llama3-8b)"

            stop = asyncio.Event()
            traffic = asyncio.create_task(_traffic(router, stop))
            try:
                # Under load: requests per second, a TTFT p99 against the SLA, the relay's share, KV on the WAN.
                await page.wait_for_function(
                    f"{_last('#chart-rps', 1)} > 0 && {_last('#chart-ttft', 2)} > 0 && "
                    f"{_last('#chart-relay', 0)} != null && {_last(f'[data-link={WAN_LINK}] .chart', 0)} > 0",
                    timeout=DEADLINE_MS)
                points = int(await page.locator("#chart-rps").get_attribute("data-points"))
                await page.wait_for_function(f"document.querySelector('#chart-rps').dataset.points > {points + 2}",
                                             timeout=DEADLINE_MS)
                assert (await page.locator("#tile-ttft b").inner_text()).endswith(("ms", " s"))
                await page.wait_for_function("document.querySelectorAll('#pipelines td').length >= 3",
                                             timeout=DEADLINE_MS)

                # The WAN line halved through its control API, in emulated units as a user gives them.
                wan = plan.link("prefill", "main-decode")
                async with aiohttp.ClientSession() as http:
                    control = ControlClient(http, f"http://{wan.host}:{wan.control_port}",
                                            link_token(run_dir=tmp_path / "mesh"))  # the one `up` made
                    await control.patch_config({"both": real_fields(wan, {"rate": "5gbit"}, plan.scenario.byte_scale)})
                await page.wait_for_function(
                    f"{_last(f'[data-link={WAN_LINK}] .chart', 1)} === 5 && "
                    f"document.querySelector('#events').textContent.includes("
                    f"'link {WAN_LINK} reconfigured: rate 10gbit -> 5gbit')", timeout=DEADLINE_MS)
                facts = await page.locator(f"[data-link={WAN_LINK}] .link-facts").inner_text()
                assert " of 5 Gbit/s" in facts
            finally:
                stop.set()
                finished = await traffic
            assert finished > 0

            # A process restarted: its keeper's count shows in the table, and the page says so.
            _kill(tmp_path / "mesh", WAN_LINK)
            await page.wait_for_function(
                f"document.querySelector('#events').textContent.includes("
                f"'{WAN_LINK} was killed by signal 9; its keeper restarted it (restart 1)') && "
                f"[...document.querySelectorAll('#processes tr')].some((row) => "
                f"row.textContent === '{WAN_LINK}running1')", timeout=DEADLINE_MS)
            await page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
            layout = await page.evaluate(LAYOUT)

            # The router itself restarted: the open page starts over with the new one.
            booted = await page.evaluate("state.booted")
            router_down.set()
            _kill(tmp_path / "mesh", "router")
            await page.wait_for_function(
                f"state.booted !== {booted} && document.querySelector('#status').classList.contains('live') && "
                f"[...document.querySelectorAll('#processes tr')].some((row) => row.textContent === 'routerrunning1')",
                timeout=DEADLINE_MS)
            await page.set_viewport_size({"width": 420, "height": 900})  # a phone: one column, no sideways scroll
            await page.wait_for_function("document.documentElement.scrollWidth <= 420", timeout=DEADLINE_MS)
            await page.screenshot(path=str(tmp_path / "dashboard-narrow.png"), full_page=True)
            narrow = await page.evaluate(LAYOUT)
            await browser.close()
    for checked in (layout, narrow):
        assert checked["overlaps"] == [] and checked["clipped"] == []
        assert legend_problems(checked["charts"]) == []
    assert {chart["chart"] for chart in layout["charts"]} == {"chart-rps", "chart-relay", "chart-ttft", "chart-tpot",
                                                               "prefill-to-relay-decode", WAN_LINK}
    assert problems == []
