"""The one client of a link's control API (netem/control.py), for every tool that reads or changes a link.

    async with aiohttp.ClientSession() as http:
        link = ControlClient(http, "http://127.0.0.1:7001", token=None)
        await link.patch_config({"both": {"rate": 4e6}})

Every call has a deadline; a refusal (any status but 200) or an unreachable link
raises ControlError, whose message names the route and what the link answered.
`call_once` runs one call from synchronous code (a CLI, a thread).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

DEFAULT_TIMEOUT_S = 10.0


class ControlError(RuntimeError):
    """A control call the link refused or never answered."""


class ControlClient:
    """One link's control API at `base_url` (http://HOST:PORT), over a caller's aiohttp session."""

    def __init__(self, http: aiohttp.ClientSession, base_url: str, token: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.http, self.base_url, self.token = http, base_url.rstrip("/"), token
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def call(self, method: str, path: str, body: object | None = None, text: str | None = None) -> dict:
        """One request; `body` goes as JSON, `text` (a schedule) as it is. The JSON answer, or ControlError."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        url = f"{self.base_url}{path}"
        try:
            async with self.http.request(method, url, json=body, data=text, headers=headers,
                                         timeout=self.timeout) as reply:
                answer = await reply.json(content_type=None)
                if reply.status != 200:
                    raise ControlError(f"{method} {url}: HTTP {reply.status}: {answer}")
                return answer if isinstance(answer, dict) else {"answer": answer}
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as err:
            raise ControlError(f"{method} {url}: {type(err).__name__}: {err}") from None

    async def config(self) -> dict:
        return await self.call("GET", "/config")

    async def patch_config(self, patch: dict) -> dict:
        return await self.call("PATCH", "/config", patch)

    async def stats(self) -> dict:
        return await self.call("GET", "/stats")

    async def post_schedule(self, schedule: object | None = None, text: str | None = None) -> dict:
        return await self.call("POST", "/schedule", schedule, text)

    async def schedule(self) -> dict:
        return await self.call("GET", "/schedule")

    async def stop_schedule(self) -> dict:
        return await self.call("DELETE", "/schedule")

    async def partition(self, mode: str, direction: str = "both", duration: str | None = None) -> dict:
        return await self.call("POST", "/partition", {"mode": mode, "direction": direction, "duration": duration})

    async def heal(self) -> dict:
        return await self.call("DELETE", "/partition")


def call_once(base_url: str, method: str, path: str, body: object | None = None, text: str | None = None,
              token: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """One control call from synchronous code, in a loop of its own; raises ControlError."""

    async def one() -> dict:
        async with aiohttp.ClientSession() as http:
            return await ControlClient(http, base_url, token, timeout_s).call(method, path, body, text)

    return asyncio.run(one())
