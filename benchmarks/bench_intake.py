"""A prompt's intake at the router: token ids against text, and a fully cached long turn.

Intake is the `pdd` timeline's `prefill_sent` minus the client's send time (the
body is encoded before the clock starts: encoding is the client's business), split
at `received` into the client-to-router leg and the router's own work. Each prompt
length is sent 5 times as ids and 5 times as the same tokens in text, every
request a prompt no cache has seen, streamed with max_tokens 2 on paper-pd-intra;
the table holds medians. Then one 61,440-id prompt 1 + 5 times: the later turns are
fully cached, and their median TTFT is set against the emulated time it must take, prefill of the
uncached tail on top of the cached prefix plus the RDMA transfer of the KV the
decode pool lacks (docs/roofline.md, docs/mesh.md "Byte scale").

With --openai, also the OpenAI Python client's legs for 61,440 ids, sent as `prompt` and
through `extra_body` (docs/mesh.md §Intake).

    .venv/bin/python -m benchmarks.bench_intake [--repeats 5] [--lengths 1024,8192,32768,61440] [--openai] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from benchmarks.meshctl import mesh
from loadgen.bench.client import error_text, read_stream
from loadgen.sse import StreamError, StreamTally
from services.engine.batch import Chunk, StepBatch
from services.engine.roofline import RooflineClock
from services.engine.tokens import WordTokenizer
from services.experiments.handoff import fresh_prompt
from services.profiles import load_model
from services.types import Role

SCENARIO = "paper-pd-intra"


async def timed(http: aiohttp.ClientSession, url: str, model: str, prompt: list[int] | str) -> dict:
    """One streamed request whose body is encoded before the send time is taken."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 2, "stream": True}).encode()
    sent_unix = time.time()
    tally = StreamTally(sent_at=time.perf_counter())
    async with http.post(f"{url}/v1/completions", data=body, headers={"content-type": "application/json"}) as reply:
        if reply.status != 200:
            raise StreamError(f"HTTP {reply.status}: {await error_text(reply)}", f"http_{reply.status}")
        await read_stream(reply, tally)
    timeline = tally.pdd["timeline"]
    received = timeline.get("received", float("nan"))  # NaN from a router older than the stamp
    return {"ttft_s": tally.ttft_s, "intake_s": timeline["prefill_sent"] - sent_unix,
            "to_router_s": received - sent_unix, "router_s": timeline["prefill_sent"] - received,
            "prefill_s": timeline["prefill_done"] - timeline["prefill_sent"], "pdd": tally.pdd}


def openai_legs(url: str, model: str, ids: list[int], repeats: int) -> dict[str, dict[str, float]]:
    """Median client-to-router and in-router times with the OpenAI client, for `prompt=ids` and `extra_body`."""
    import openai  # a test extra, needed only here

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=120, max_retries=0)
    legs = {}
    for how, kwargs in (("prompt", {"prompt": ids}), ("extra_body", {"prompt": [0], "extra_body": {"prompt": ids}})):
        runs = []
        for _ in range(repeats):
            sent_unix = time.time()
            chunks = list(client.completions.create(model=model, max_tokens=2, stream=True, **kwargs))
            timeline = chunks[-1].model_extra["pdd"]["timeline"]
            runs.append((timeline["received"] - sent_unix, timeline["prefill_sent"] - timeline["received"]))
        legs[how] = {"to_router_s": statistics.median(r[0] for r in runs),
                     "router_s": statistics.median(r[1] for r in runs)}
    return legs


def emulated_cached_turn_s(plan, prompt_tokens: int, prefill_hit: int, decode_hit: int) -> tuple[float, float]:
    """Roofline prefill of the uncached tail on its cached prefix, and the RDMA transfer of what decode lacks."""
    scenario = plan.scenario
    pool = scenario.pools_with(Role.PREFILL)[0]
    clock = RooflineClock.for_names(pool.gpu, scenario.model, tp=pool.tp)
    prefill_s = clock.step_seconds(StepBatch(chunks=(Chunk(prompt_tokens - prefill_hit, prefill_hit),)))
    kv_bytes = (prompt_tokens - decode_hit) * load_model(scenario.model).kv_bytes_per_token
    return prefill_s, scenario.rdma.delay_s + kv_bytes * 8 / scenario.rdma.rate_bps


async def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp, mesh(SCENARIO, Path(tmp)) as (url, plan):
        model = plan.scenario.model
        words = WordTokenizer(load_model(model).vocab_size)
        rows = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
            await timed(http, url, model, fresh_prompt(64, 999))  # warm connections and code paths
            for length in args.lengths:
                for form in ("ids", "text"):
                    runs = []
                    for i in range(args.repeats):
                        ids = fresh_prompt(length, 1000 * length + 10 * i + (form == "text"))
                        runs.append(await timed(http, url, model, ids if form == "ids" else words.decode(ids)))
                    rows.append({"tokens": length, "form": form, "runs": args.repeats,
                                 **{k: statistics.median(r[k] for r in runs)
                                    for k in ("intake_s", "to_router_s", "router_s", "prefill_s", "ttft_s")}})
            long = fresh_prompt(61_440, 7)
            await timed(http, url, model, long)
            cached = [await timed(http, url, model, long) for _ in range(args.repeats)]
        pdd = cached[0]["pdd"]
        if any(c["pdd"]["prefill_hit_tokens"] != pdd["prefill_hit_tokens"] for c in cached):
            raise RuntimeError("the cached turns did not all hit the same prefix")
        legs = await asyncio.to_thread(openai_legs, url, model, long, args.repeats) if args.openai else None
        hits = pdd["prefill_hit_tokens"], pdd["decode_hit_tokens"]
        prefill_s, transfer_s = emulated_cached_turn_s(plan, 61_440, *hits)
        ttft_s = statistics.median(c["ttft_s"] for c in cached)
        return {"scenario": SCENARIO, "rows": rows, "openai": legs,
                "cached": {"tokens": 61_440, "runs": len(cached), "prefill_hit_tokens": pdd["prefill_hit_tokens"],
                           "decode_hit_tokens": pdd["decode_hit_tokens"], "ttft_s": ttft_s,
                           "intake_s": statistics.median(c["intake_s"] for c in cached),
                           "prefill_s": statistics.median(c["prefill_s"] for c in cached),
                           "emulated_prefill_s": prefill_s, "emulated_transfer_s": transfer_s,
                           "overhead_s": ttft_s - prefill_s - transfer_s}}


def report(results: dict) -> None:
    print(f"intake on {results['scenario']} (median of {results['rows'][0]['runs']}; ms):")
    print(f"  {'tokens':>7} {'form':<5}{'intake':>9}{'to router':>11}{'in router':>11}{'prefill':>10}{'TTFT':>10}"
          f"{'ids/text':>10}")
    text = {r["tokens"]: r["intake_s"] for r in results["rows"] if r["form"] == "text"}
    for r in results["rows"]:
        ratio = f"{r['intake_s'] / text[r['tokens']]:10.2f}" if r["form"] == "ids" else ""
        print(f"  {r['tokens']:>7} {r['form']:<5}{r['intake_s'] * 1e3:9.1f}{r['to_router_s'] * 1e3:11.1f}"
              f"{r['router_s'] * 1e3:11.1f}{r['prefill_s'] * 1e3:10.1f}{r['ttft_s'] * 1e3:10.1f}{ratio}")
    c = results["cached"]
    print(f"fully cached {c['tokens']}-id turn, median of {c['runs']} (hit {c['prefill_hit_tokens']} at prefill, "
          f"{c['decode_hit_tokens']} at decode): TTFT {c['ttft_s'] * 1e3:.1f} ms = emulated prefill "
          f"{c['emulated_prefill_s'] * 1e3:.1f} + transfer {c['emulated_transfer_s'] * 1e3:.2f} + overhead "
          f"{c['overhead_s'] * 1e3:+.1f} ms (intake {c['intake_s'] * 1e3:.1f} ms, prefill_sent to prefill_done "
          f"{c['prefill_s'] * 1e3:.1f} ms)")
    for how, leg in (results["openai"] or {}).items():
        print(f"openai client, 61440 ids as {how}: to router {leg['to_router_s'] * 1e3:.1f} ms, "
              f"in router {leg['router_s'] * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lengths", type=lambda s: [int(x) for x in s.split(",")], default=[1024, 8192, 32768, 61_440])
    parser.add_argument("--openai", action="store_true", help="also time the OpenAI Python client's legs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    print(json.dumps(results)) if args.json else report(results)


if __name__ == "__main__":
    main()
