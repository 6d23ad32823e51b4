"""Shared by the mesh benchmarks: run a scenario's mesh, stream one request, read service stats."""

from __future__ import annotations

import json
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import aiohttp

from services.launcher.plan import MeshPlan, build_plan
from services.launcher.processes import start_mesh, stop_processes
from services.scenario import load_scenario


@contextmanager
def mesh(scenario: str, run_dir: Path, *overrides: str) -> Iterator[tuple[str, MeshPlan]]:
    plan = build_plan(load_scenario(scenario, overrides))
    processes = start_mesh(plan, run_dir)
    try:
        yield f"http://{plan.router.host}:{plan.router.http_port}", plan
    finally:
        stop_processes(processes)


def service_stats(plan: MeshPlan, name: str, reset_lag: bool = False) -> dict:
    service = plan.service(name)
    query = "?reset_lag=1" if reset_lag else ""
    with urllib.request.urlopen(f"http://{service.host}:{service.http_port}/stats{query}", timeout=10) as reply:
        return json.loads(reply.read())


def link_stats(plan: MeshPlan, kind: str) -> dict:
    link = next(l for l in plan.links if l.kind == kind)
    with urllib.request.urlopen(f"http://{link.host}:{link.control_port}/stats", timeout=10) as reply:
        return json.loads(reply.read())


async def stream(http: aiohttp.ClientSession, url: str, prompt: list[int], max_tokens: int,
                 model: str = "llama3-8b") -> dict:
    """One streaming completion: client-side TTFT, token gaps and the final `pdd` stats."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True}
    sent = time.perf_counter()
    stamps, pdd = [], None
    async with http.post(f"{url}/v1/completions", json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {await response.text()}")
        async for raw in response.content:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(chunk["error"]["message"])
            if chunk["choices"][0]["text"]:
                stamps.append(time.perf_counter())
            pdd = chunk.get("pdd") or pdd
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return {"ttft_s": stamps[0] - sent, "e2e_s": stamps[-1] - sent, "tokens": len(stamps),
            "max_gap_s": max(gaps, default=0.0), "pdd": pdd}


def fresh_prompt(length: int, salt: int) -> list[int]:
    return [(i * 7919 + salt * 104729) % 50000 for i in range(length)]
