"""The 100-token handoff: token ids + local extend (pdd) against shipping the relay's KV (pdd-kvship).

Each request is a fresh prompt sized so main decode's KV lands after the relay
has produced about 100 tokens; handoffs are forced one-shot. The handoff time
is main decode's stall: from the start of the handoff to its first token. The
WAN is made jittery (pareto-normal) so the KV-shipping path feels it.

    .venv/bin/python -m benchmarks.bench_handoff [--requests 20] [--jitter 20ms] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

import aiohttp

from benchmarks.meshctl import fresh_prompt, mesh, stream

PROMPT_TOKENS = 8000  # about 0.84 s of Llama-3-8B KV over 10 Gbit/s: some 100 relay tokens


async def measure(scenario: str, args: argparse.Namespace) -> dict:
    overrides = [f"wan.jitter_s={args.jitter}", "wan.jitter_dist=paretonormal", "pdd.catch_up_threshold=100000",
                 "pdd.relay_cap=100000"]
    stalls, cuts, gaps = [], [], []
    with tempfile.TemporaryDirectory() as tmp, mesh(scenario, Path(tmp), *overrides) as (url, _):
        async with aiohttp.ClientSession() as http:
            for i in range(args.requests):
                result = await stream(http, url, fresh_prompt(PROMPT_TOKENS, 5000 + i), args.max_tokens)
                handoff = result["pdd"]["handoff"]
                if result["pdd"]["pipeline"] != "P-RLD-MD" or not handoff:
                    continue
                stalls.append(handoff["stall_s"])
                cuts.append(handoff["cut"])
                gaps.append(result["max_gap_s"])
    return {"requests": len(stalls), "mean_s": statistics.fmean(stalls), "max_s": max(stalls),
            "std_s": statistics.pstdev(stalls), "cut_tokens_mean": statistics.fmean(cuts),
            "client_max_gap_mean_s": statistics.fmean(gaps)}


async def run(args: argparse.Namespace) -> dict:
    return {"token_ids": await measure("pdd-mini", args), "kv_ship": await measure("pdd-kvship-mini", args)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--jitter", default="20ms")
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    if args.json:
        print(json.dumps(results))
        return
    print(f"{'path':<10}{'n':>4}{'mean ms':>10}{'max ms':>10}{'std ms':>10}{'cut tokens':>12}{'client gap ms':>15}")
    for name, r in results.items():
        print(f"{name:<10}{r['requests']:>4}{r['mean_s'] * 1e3:10.1f}{r['max_s'] * 1e3:10.1f}{r['std_s'] * 1e3:10.1f}"
              f"{r['cut_tokens_mean']:12.0f}{r['client_max_gap_mean_s'] * 1e3:15.1f}")


if __name__ == "__main__":
    main()
