"""Open a page in a real headless Chromium over the DevTools protocol: which images loaded, and a screenshot.

Chromium is Debian's `chromium` package (.ci/run installs it). The page is
loaded from a file:// URL, as a person opening the report would.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import aiohttp

IMAGES = ("JSON.stringify(Array.from(document.images, i => [i.getAttribute('src'), i.complete, i.naturalWidth, "
          "(i.closest('figure')?.querySelector('figcaption')?.innerText) || '']))")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


async def _devtools_port(profile: Path, deadline_s: float) -> int:
    marker = profile / "DevToolsActivePort"
    async with asyncio.timeout(deadline_s):
        while not marker.is_file() or not marker.read_text().strip():
            await asyncio.sleep(0.05)  # polling a file Chromium writes once it listens
    return int(marker.read_text().split()[0])


async def inspect_page(page: Path, screenshot: Path, deadline_s: float = 60.0) -> list[tuple[str, bool, int, str]]:
    """(src, complete, natural width, caption) of every <img> on `page` once loaded; writes a PNG screenshot."""
    with tempfile.TemporaryDirectory() as profile:
        process = subprocess.Popen(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "--window-size=1200,3000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = await _devtools_port(Path(profile), deadline_s)
            async with aiohttp.ClientSession() as http, asyncio.timeout(deadline_s):
                async with http.get(f"http://127.0.0.1:{port}/json/list") as reply:
                    target = next(t for t in await reply.json() if t["type"] == "page")
                async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                    calls = iter(range(1, 1000))

                    async def call(method: str, **params) -> dict:
                        ident = next(calls)
                        await ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
                        async for message in ws:
                            data = json.loads(message.data)
                            if data.get("id") == ident:
                                return data.get("result", {})
                            if data.get("method") == "Page.loadEventFired":
                                loaded.set()
                        raise ConnectionError("DevTools closed the connection")

                    loaded = asyncio.Event()
                    await call("Page.enable")
                    await call("Page.navigate", url=page.resolve().as_uri())
                    while not loaded.is_set():
                        message = await ws.receive()
                        if json.loads(message.data).get("method") == "Page.loadEventFired":
                            loaded.set()
                    images = json.loads((await call("Runtime.evaluate", expression=IMAGES))["result"]["value"])
                    shot = await call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                    screenshot.write_bytes(base64.b64decode(shot["data"]))
            return [tuple(i) for i in images]
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
