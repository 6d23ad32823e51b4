"""Does the emulator distort what it emulates? Idle TTFT against the clock, and event-loop lag under load.

1. Idle: one fresh request on pd-cross-mini. Its client-side TTFT should equal the
   roofline prefill time plus the KV transfer time (delay + bytes / rate) plus a
   small overhead (target: under 20 ms).
2. Load: 50 concurrent streaming requests; every service's event-loop lag p99
   (a 10 ms timer's lateness, sampled throughout) should stay under 5 ms.

    .venv/bin/python benchmarks/bench_mesh_lag.py [--concurrency 50] [--prompt 4096]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import aiohttp

from benchmarks.meshctl import link_stats, mesh, service_stats
from loadgen.probe import probe_stream
from services.engine.roofline import RooflineClock
from services.experiments.handoff import fresh_prompt
from services.profiles import load_model


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, mesh("pd-cross-mini", Path(tmp)) as (url, plan):
        scenario = plan.scenario
        prefill_gpu = next(p.gpu for p in scenario.pools if p.role.value == "prefill")
        clock = RooflineClock.for_names(prefill_gpu, scenario.model)
        kv_bytes = args.prompt * load_model(scenario.model).kv_bytes_per_token
        async with aiohttp.ClientSession() as http:
            await probe_stream(http, url, scenario.model, fresh_prompt(64, 999), 2)  # warm connections and code paths
            rows = []
            for i in range(args.idle_repeats):
                result = await probe_stream(http, url, scenario.model, fresh_prompt(args.prompt, i), 4)
                chunk = scenario.engine.long_prefill_token_threshold or scenario.engine.max_batched_tokens
                prefill_s = clock.chunked_prefill_seconds(args.prompt, chunk)
                transfer_s = scenario.wan.delay_s + kv_bytes * 8 / scenario.wan.rate_bps
                rows.append((result["ttft_s"], prefill_s, transfer_s))
            print(f"idle TTFT, {args.prompt}-token fresh prompt on {scenario.name}:")
            for ttft, prefill_s, transfer_s in rows:
                print(f"  measured {ttft * 1e3:8.1f} ms = prefill {prefill_s * 1e3:.1f} + transfer "
                      f"{transfer_s * 1e3:.1f} + overhead {(ttft - prefill_s - transfer_s) * 1e3:+.1f} ms")
            names = [s.name for s in plan.services]
            for name in names:
                service_stats(plan, name, reset_lag=True)
            prompts = [fresh_prompt(args.load_prompt, 1000 + i) for i in range(args.concurrency)]
            results = await asyncio.gather(*(probe_stream(http, url, scenario.model, p, args.max_tokens)
                                             for p in prompts))
        print(f"\n{args.concurrency} concurrent streams ({args.load_prompt}-token prompts, {args.max_tokens} tokens):"
              f" all {sum(r['tokens'] == args.max_tokens for r in results)} complete")
        print(f"  {'service':<14}{'lag p50 ms':>12}{'lag p99 ms':>12}{'samples':>9}")
        for name in names:
            lag = service_stats(plan, name)["loop_lag_s"]
            print(f"  {name:<14}{lag['p50'] * 1e3:12.2f}{lag['p99'] * 1e3:12.2f}{lag['samples']:9d}")
        wan = link_stats(plan, "wan", Path(tmp))["up"]
        print(f"  wan link: late mean {wan['late_mean_s'] * 1e3:.2f} ms, late max {wan['late_max_s'] * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt", type=int, default=4096, help="idle request prompt tokens")
    parser.add_argument("--idle-repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--load-prompt", type=int, default=2048)
    parser.add_argument("--max-tokens", type=int, default=128)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
