"""The 100-token handoff: token ids + local extend (pdd) against shipping the relay's KV (pdd-kvship).

Each request is a fresh prompt sized so that main decode's KV lands when the
relay has produced about `cut_tokens` tokens (docs/results.md §Handoff):

    transfer time = delay + prompt x KV bytes per token x 8 / WAN rate ~ cut_tokens x relay step time

Handoffs are forced one-shot (the catch-up threshold and relay cap are lifted).
The handoff time is main decode's stall, from the start of the handoff to its
first token. The WAN is made jittery (pareto-normal) so the KV-shipping path,
whose bytes cross it, feels it; token ids travel on the control plane.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp

from loadgen.probe import probe_stream
from services.engine.batch import StepBatch
from services.engine.roofline import RooflineClock
from services.launcher.plan import build_plan
from services.launcher.processes import start_mesh, stop_processes
from services.profiles import load_model
from services.scenario import Scenario, load_scenario
from services.types import Role

FORCE_ONE_SHOT = ("pdd.catch_up_threshold=100000", "pdd.relay_cap=100000")


@dataclass(frozen=True)
class HandoffStats:
    requests: int
    mean_s: float
    max_s: float
    std_s: float
    cut_tokens_mean: float
    client_max_gap_mean_s: float
    stalls_s: list[float]


def fresh_prompt(length: int, salt: int) -> list[int]:
    """A prompt no cache has seen: distinct per salt."""
    return [(i * 7919 + salt * 104729) % 50000 for i in range(length)]


def prompt_for_cut(scenario: Scenario, cut_tokens: int) -> int:
    """Prompt length whose WAN transfer lasts about `cut_tokens` relay decode steps (at batch 1)."""
    relay = scenario.pools_with(Role.RELAY_DECODE)[0]
    model = load_model(scenario.model)
    clock = RooflineClock.for_names(relay.gpu, scenario.model, tp=relay.tp)
    estimate = 16384
    for _ in range(3):  # the relay's step time depends on the context it attends over
        step_s = clock.step_seconds(StepBatch(decode_contexts=(estimate + cut_tokens // 2,)))
        transfer_s = cut_tokens * step_s - scenario.wan.delay_s
        estimate = max(1024, round(transfer_s * scenario.wan.rate_bps / 8 / model.kv_bytes_per_token))
    return min(estimate, model.max_context // 2)


async def measure(scenario: Scenario, prompt_tokens: int, requests: int, max_tokens: int, run_dir: Path,
                  salt: int = 5000) -> HandoffStats:
    """Send `requests` fresh prompts one after another; keep the relayed ones that handed off."""
    plan = build_plan(scenario)
    processes = await asyncio.to_thread(start_mesh, plan, run_dir)
    url = f"http://{plan.router.host}:{plan.router.http_port}"
    stalls, cuts, gaps = [], [], []
    timeout = aiohttp.ClientTimeout(total=scenario.request_timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            for i in range(requests):
                prompt = fresh_prompt(prompt_tokens, salt + i)
                result = await probe_stream(http, url, scenario.model, prompt, max_tokens)
                handoff = result["pdd"]["handoff"]
                if result["pdd"]["pipeline"] != "P-RLD-MD" or not handoff:
                    continue
                stalls.append(handoff["stall_s"])
                cuts.append(handoff["cut"])
                gaps.append(result["max_gap_s"])
    finally:
        await asyncio.to_thread(stop_processes, processes)
    if not stalls:
        raise RuntimeError(f"{scenario.name}: no request took P-RLD-MD with a handoff; the prompt is too short")
    return HandoffStats(len(stalls), statistics.fmean(stalls), max(stalls), statistics.pstdev(stalls),
                        statistics.fmean(cuts), statistics.fmean(gaps), stalls)


async def compare(token_ids: str, kv_ship: str, requests: int, jitter: str = "20ms", max_tokens: int = 300,
                  cut_tokens: int = 100, extra: tuple[str, ...] = (), out_dir: Path | None = None) -> dict:
    """Both handoffs on the same deployment shape: {"token_ids": stats, "kv_ship": stats, "prompt_tokens": n}."""
    overrides = (f"wan.jitter_s={jitter}", "wan.jitter_dist=paretonormal", *FORCE_ONE_SHOT, *extra)
    scenarios = {"token_ids": load_scenario(token_ids, overrides), "kv_ship": load_scenario(kv_ship, overrides)}
    prompt_tokens = prompt_for_cut(scenarios["token_ids"], cut_tokens)
    result: dict = {"prompt_tokens": prompt_tokens, "cut_target": cut_tokens}
    with tempfile.TemporaryDirectory() as tmp:
        base = out_dir or Path(tmp)
        for name, scenario in scenarios.items():
            stats = await measure(scenario, prompt_tokens, requests, max_tokens, base / f"mesh-{name}")
            result[name] = asdict(stats)
    return result
