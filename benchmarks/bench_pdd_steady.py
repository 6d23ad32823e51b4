"""PDD at steady agentic load: the relay's share of output tokens and whether its queue stays bounded.

Runs pdd-mini under the default agentic workload (mean prefix hit about 90%,
most requests above 95%) for --duration seconds, sampling the relay's running
and waiting sequences once a second. P-RLD is excluded by policy, so the relay
should produce a small minority of tokens and its queue should not grow: the
positive feedback PDD warns of (relay finishes requests, main decode's cache
misses the next turn, more traffic needs the relay) would show as a climb.
Prints the share, the queue's time series summary, and writes a PNG plot.

    .venv/bin/python -m benchmarks.bench_pdd_steady [--duration 300] [--rate 2] [--plot docs/img/pdd-steady.png]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

from benchmarks.meshctl import mesh, service_stats
from loadgen.bench.config import BenchConfig
from loadgen.bench.runner import run_bench

# Outputs of 256 to 1K tokens, as in the PDD report's agentic runs; 1 req/s keeps the 10 Gbit/s line
# below saturation with Llama-3-8B's 128 KiB of KV per token (docs/pdd.md §Steady state).
WORKLOAD = "agentic:context=32K,output=256..1K,think=0.5,turns=20"


def relay_queue(plan) -> int:
    stats = service_stats(plan, "relay-decode")
    return sum(i["running"] + i["waiting"] for i in stats["instances"].values())


async def run(args: argparse.Namespace) -> dict:
    samples: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory() as tmp, mesh("pdd-mini", Path(tmp) / "mesh") as (url, plan):
        config = BenchConfig(url=url, workload=args.workload, out_dir=Path(tmp) / "run", rate=args.rate,
                             duration_s=args.duration, seed=args.seed, progress=False)
        bench = asyncio.create_task(run_bench(config))
        loop = asyncio.get_running_loop()
        start = loop.time()
        while not bench.done():
            samples.append((loop.time() - start, await asyncio.to_thread(relay_queue, plan)))
            await asyncio.wait([bench], timeout=1.0)
        summary = bench.result()
        records = [json.loads(line) for line in (Path(tmp) / "run" / "requests.jsonl").read_text().splitlines()]
    pipelines: dict[str, int] = {}
    errors: dict[str, int] = {}
    for record in records:
        pipeline = (record.get("pdd") or {}).get("pipeline", "failed")
        pipelines[pipeline] = pipelines.get(pipeline, 0) + 1
        if record["status"] != "ok":
            key = f"{record['http_status']}: {record['error']}"[:160]
            errors[key] = errors.get(key, 0) + 1
    queue = [q for _, q in samples]
    half = len(queue) // 2
    result = {"sent": summary.sent, "completed": summary.completed, "failed": summary.failed,
              "rld_token_share": summary.rld_token_share, "pipelines": pipelines, "errors": errors,
              "hit_rate_bins": summary.hit_rate_bins,
              "relay_queue": {"max": max(queue), "mean": statistics.fmean(queue),
                              "mean_first_half": statistics.fmean(queue[:half] or [0]),
                              "mean_second_half": statistics.fmean(queue[half:] or [0])}}
    if args.plot:
        plot(samples, args.plot)
        result["plot"] = str(args.plot)
    return result


def plot(samples: list[tuple[float, int]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot([t for t, _ in samples], [q for _, q in samples], lw=1)
    ax.set_xlabel("seconds")
    ax.set_ylabel("relay sequences (running + waiting)")
    ax.set_title("pdd-mini: relay-decode queue at steady agentic load")
    ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--workload", default=WORKLOAD)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=None)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=1))


if __name__ == "__main__":
    main()
