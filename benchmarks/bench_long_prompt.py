"""TTFT of one lone fresh long prompt through a running mesh, against the roofline's chunk sum.

    pdd-emu up --scenario paper-pd-intra --detach          # prints "router: http://HOST:PORT"
    python -m benchmarks.bench_long_prompt --url http://HOST:PORT --scenario paper-pd-intra

The reference is what `pdd-emu predict` gives for each whole-budget chunk over the context
already cached, summed (docs/engine.md, "Long prompts").
"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp

from loadgen.probe import probe_stream
from services.engine.roofline import RooflineClock
from services.experiments.handoff import fresh_prompt
from services.scenario import load_scenario
from services.types import Role


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="router URL of a running mesh")
    parser.add_argument("--scenario", default="paper-pd-intra", help="the scenario that mesh runs")
    parser.add_argument("--prompt", type=int, default=61440, help="prompt tokens (default 61440)")
    parser.add_argument("--salt", type=int, default=61, help="another salt gives a prompt no cache has seen")
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    prefill = next(p for p in scenario.pools if p.role is Role.PREFILL)
    clock = RooflineClock.for_names(prefill.gpu, scenario.model, tp=prefill.tp, dp_attention=prefill.dp_attention,
                                    ep=prefill.ep)
    chunk = scenario.engine.long_prefill_token_threshold or scenario.engine.max_batched_tokens
    predicted = clock.chunked_prefill_seconds(args.prompt, chunk)
    timeout = aiohttp.ClientTimeout(total=scenario.request_timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        result = await probe_stream(http, args.url, scenario.model, fresh_prompt(args.prompt, args.salt), 2)
    ttft = result["ttft_s"]
    print(f"{args.scenario}: lone fresh {args.prompt}-token prompt, TTFT {ttft:.3f} s; roofline chunk sum "
          f"({-(-args.prompt // chunk)} chunks of up to {chunk}) {predicted:.3f} s; ratio {ttft / predicted:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
